"""Letta's ``fetch_webpage`` tool: a page over HTTP(S), turned into readable Markdown.

Only public addresses are reached unless the operator sets ``STATELOOP_FETCH_PRIVATE_URLS=1``:
every hop of a redirect, and the address actually connected to, is checked
(``addresses.GuardedTransport``), so neither a redirect nor a name that resolves elsewhere the
second time reaches loopback, private or link-local addresses. At most ``MAX_REDIRECTS``
redirects are followed; at most ``STATELOOP_FETCH_MAX_BYTES`` of the body (5 MB) are read,
decompressed; the whole fetch, redirects included, has a deadline (``STATELOOP_WEB_TIMEOUT``,
20 s). trafilatura extracts the page's main text as
Markdown, off the event loop; the Markdown handed back is cut at ``MAX_CHARS``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import anyio
import httpx2

from ..addresses import GuardedTransport, RefusedAddress
from .execution import truncated
from .web_search import TIMEOUT, web_timeout

MAX_REDIRECTS = 5
MAX_BYTES = 5_000_000
MAX_CHARS = 100_000
USER_AGENT = "Mozilla/5.0 (compatible; stateloop fetch_webpage)"
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """What a fetch may reach and read."""

    private_urls: bool = False
    max_bytes: int = MAX_BYTES
    timeout: float = TIMEOUT

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> FetchSettings:
        raw = env.get("STATELOOP_FETCH_MAX_BYTES")
        try:
            max_bytes = int(raw) if raw else MAX_BYTES
        except ValueError:
            raise ValueError(f"STATELOOP_FETCH_MAX_BYTES must be a number of bytes, not "
                             f"{raw!r}") from None
        return cls(env.get("STATELOOP_FETCH_PRIVATE_URLS", "").strip().lower() in _TRUE,
                   max_bytes, web_timeout(env))


async def fetch_webpage(url: str) -> str:
    """Fetch a webpage and convert it to markdown/text format.

    Args:
        url: The URL of the webpage to fetch and convert
    """
    settings = FetchSettings.from_env(os.environ)
    scheme = url.partition(":")[0].lower() if ":" in url else ""
    if scheme not in ("http", "https"):
        raise ValueError(f"Invalid URL scheme '{scheme}'. Only 'http' and 'https' URLs are "
                         f"supported.")
    try:
        body, content_type, cut = await fetch(url, settings)
    except RefusedAddress as exc:
        raise PermissionError(f"{exc}: this server does not fetch such addresses (its "
                              f"operator may allow them: STATELOOP_FETCH_PRIVATE_URLS=1)"
                              ) from None
    text = await anyio.to_thread.run_sync(to_markdown, body, content_type)
    if cut:
        text += f"\n\n[the page was cut at {settings.max_bytes} bytes]"
    return truncated(text, MAX_CHARS)


async def fetch(url: str, settings: FetchSettings) -> tuple[bytes, str, bool]:
    """The body (at most ``settings.max_bytes`` of it), its content type, and whether it was
    cut."""
    transport = GuardedTransport(public_only=not settings.private_urls, max_bytes=None)
    async with httpx2.AsyncClient(transport=transport, follow_redirects=True,
                                  max_redirects=MAX_REDIRECTS, timeout=settings.timeout,
                                  headers={"User-Agent": USER_AGENT}) as client:
        with anyio.fail_after(settings.timeout):
            async with client.stream("GET", url) as response:
                response.raise_for_status()
                chunks, size, cut = [], 0, False
                async for chunk in response.aiter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > settings.max_bytes:
                        cut = True
                        break
                body = b"".join(chunks)[:settings.max_bytes]
                return body, response.headers.get("content-type", ""), cut


def to_markdown(body: bytes, content_type: str) -> str:
    """The page's main text as Markdown; a page that is not HTML, as its text."""
    from trafilatura import extract, html2txt  # lazy: trafilatura loads lxml on first fetch

    text = body.decode(_charset(content_type), errors="replace")
    if "html" not in content_type.lower() and not text.lstrip().startswith("<"):
        return text
    found = extract(text, output_format="markdown", include_links=True, include_tables=True,
                    favor_recall=True)
    return found or html2txt(text) or ""


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.lower() == "charset" and value:
            try:
                "".encode(value.strip('"'))
            except LookupError:
                break
            return value.strip('"')
    return "utf-8"
