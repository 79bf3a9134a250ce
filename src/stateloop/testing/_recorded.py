"""What the fake provider plays and keeps: its script types, responses replayed byte for
byte (``recorded``), and the requests it received (``RecordedRequest``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..llm.base import ModelRequest
from .scripted import ScriptItem

Flavor = Literal["openai", "anthropic", "gemini"]


@dataclass(slots=True)
class Recorded:
    """A response replayed byte for byte, such as a provider's SSE stream saved to a file."""

    body: bytes
    status: int = 200
    content_type: str = "text/event-stream"


def recorded(source: str | bytes | os.PathLike[str], *, status: int = 200,
             content_type: str = "text/event-stream") -> Recorded:
    """A script item that replays ``source`` (bytes, or a file path) as the response."""
    body = source if isinstance(source, bytes) else Path(source).read_bytes()
    return Recorded(body, status, content_type)


FakeItem = ScriptItem | Recorded
FakeScript = Sequence[FakeItem] | Callable[[ModelRequest], FakeItem]


@dataclass(slots=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any] = field(default_factory=dict)


class FakeScriptExhausted(Exception):
    """A model request came after the last item of a list script."""
