"""Letta's image content parts (``ImageContent``) in message requests, and how they become
our ``ImagePart``: an image by URL, or base64 data sent on as a ``data:`` URL."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ...messages import ImagePart


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore")


class UrlImage(_Part):
    type: Literal["url"] = "url"
    url: str


class Base64Image(_Part):
    type: Literal["base64"] = "base64"
    media_type: str
    data: str
    detail: str | None = None


class ImageContent(_Part):
    """An image in a user message. Letta's third source, an uploaded file (``letta``), has
    no files here to name, so it is refused with 422."""

    type: Literal["image"] = "image"
    source: UrlImage | Base64Image

    def to_part(self) -> ImagePart:
        source = self.source
        if isinstance(source, UrlImage):
            return ImagePart(source.url)
        return ImagePart(f"data:{source.media_type};base64,{source.data}", source.media_type)


def image_view(part: ImagePart) -> dict[str, object]:
    """A stored image as Letta's ``ImageContent`` in a listed ``user_message``."""
    prefix, _, data = part.url.partition(";base64,")
    if prefix.startswith("data:") and data:
        return {"type": "image", "source": {"type": "base64", "data": data, "detail": None,
                                            "media_type": part.media_type or prefix[5:]}}
    return {"type": "image", "source": {"type": "url", "url": part.url}}
