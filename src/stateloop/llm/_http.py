"""HTTP for the adapters: one httpx2 client per event loop, server-sent events, and failures
turned into ``ModelError``.

The adapters post their bodies with httpx2 themselves: its pool checks a connection in
constant time, where httpx's polled every idle socket on each request and closed kept-alive
connections whenever more than 20 were open (busy ones counted), about 1.2 ms of CPU a call
with a hundred agents calling at once. The provider SDKs re-validate and re-serialize the
whole transcript on every call, which made a call cost time in proportion to the
conversation; here a body is bytes assembled from pieces kept between calls (``pieces.py``),
and the SDKs are not imported at all.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2
import orjson

from ..errors import InvalidResponse, ModelError, Unavailable
from ._errors import classify, error_details, retry_after_seconds, retry_info_seconds
from .base import StreamItem

_ssl: ssl.SSLContext | None = None
# Each running loop's client, and the parked async generator that closes it (kept here:
# the loop itself holds its async generators weakly).
_clients: dict[asyncio.AbstractEventLoop,
               tuple[httpx2.AsyncClient, AsyncGenerator[None, None]]] = {}


def tls_context() -> ssl.SSLContext:
    """The TLS settings of model calls, made once for the process: loading the CA bundle
    costs milliseconds (tens on a busy machine)."""
    global _ssl
    if _ssl is None:
        _ssl = httpx2.create_ssl_context()
    return _ssl


async def shared_client() -> httpx2.AsyncClient:
    """The running loop's client, shared by every adapter: connections belong to a loop."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is not None and not found[0].is_closed:
        return found[0]
    for old in [old for old in _clients if old.is_closed()]:  # closed without a shutdown
        del _clients[old]
    client = httpx2.AsyncClient(verify=tls_context(), timeout=None)
    closer = _close_at_shutdown(loop, client)
    _clients[loop] = client, closer
    await closer.asend(None)
    return client


async def _close_at_shutdown(loop: asyncio.AbstractEventLoop, client: httpx2.AsyncClient
                             ) -> AsyncGenerator[None, None]:
    # A started async generator is known to its loop, and ``loop.shutdown_asyncgens()`` (which
    # asyncio.run and asyncio.Runner call before closing the loop) closes it: so the pooled
    # connections are closed while their loop still runs, never after it.
    try:
        yield
    finally:
        found = _clients.get(loop)
        if found is not None and found[0] is client:
            del _clients[loop]
        await client.aclose()


async def post_stream(url: str, body: bytes, headers: dict[str, str], timeout: float, *,
                      provider: str) -> httpx2.Response:
    """The open response of a streaming POST; a status of 400 or more is raised as the
    ``ModelError`` it stands for, with the provider's own words."""
    client = await shared_client()
    request = client.build_request("POST", _parsed(url), content=body, headers=headers,
                                   timeout=timeout)
    response = await client.send(request, stream=True)
    if response.status_code < 400:
        return response
    try:
        text = (await response.aread()).decode("utf-8", "replace").strip()
    finally:
        await response.aclose()
    try:
        parsed: object = loads(text)
    except json.JSONDecodeError:
        parsed = text
    message, kind, code = error_details(parsed)
    retry_after = retry_after_seconds(response.headers)
    if retry_after is None:
        retry_after = retry_info_seconds(parsed)
    raise classify(response.status_code, message or text or f"Error code: "
                   f"{response.status_code}", provider=provider, error_type=kind, code=code,
                   retry_after=retry_after)


@functools.lru_cache(maxsize=64)
def _parsed(url: str) -> httpx2.URL:
    """An endpoint's URL parsed once: httpx2 parses a string again on every request."""
    return httpx2.URL(url)


async def server_sent_events(response: httpx2.Response) -> AsyncIterator[tuple[str | None, str]]:
    """``(event name, data)`` of each event with data, as the SSE specification reads them,
    up to OpenAI's closing ``[DONE]``; the body is read to its end, so that the connection
    goes back to the pool (a new one would cost a TLS handshake)."""
    event: str | None = None
    data: list[str] = []
    try:
        lines = response.aiter_lines()
        async for line in lines:
            if not line:
                if data:
                    text = "\n".join(data)
                    if text == "[DONE]":
                        async for _ in lines:
                            pass
                        return
                    yield event, text
                event, data = None, []
            elif line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
            elif line.startswith("event:"):
                event = line[6:].strip()
        if data:
            yield event, "\n".join(data)
    finally:
        await response.aclose()


async def model_stream(open_stream: Callable[[], Awaitable[httpx2.Response]],
                       read: Callable[[httpx2.Response], AsyncIterator[StreamItem]],
                       base_url: str, provider: str) -> AsyncIterator[StreamItem]:
    """``read`` the response ``open_stream`` opens; network failures and malformed JSON come
    out as ``ModelError``, told apart by whether the stream had opened."""
    opened = False
    try:
        response = await open_stream()
        opened = True
        async for item in read(response):
            yield item
    except ModelError:
        raise
    except httpx2.TimeoutException as exc:
        raise Unavailable(f"timed out waiting for {base_url}", provider=provider) from exc
    except httpx2.TransportError as exc:
        if not opened:
            raise Unavailable(f"could not connect to {base_url}: {exc}",
                              provider=provider) from exc
        raise Unavailable(f"the connection to {base_url} broke mid-stream: {exc}",
                          provider=provider) from exc
    except json.JSONDecodeError as exc:
        what = "chunk" if provider == "openai" else "event"
        raise InvalidResponse(f"malformed {what} in the stream from {base_url}: {exc}",
                              provider=provider) from exc


def loads(data: str) -> Any:
    """An event's JSON. orjson refuses escaped lone surrogates (``"\\ud800"``), which
    providers do send; json reads them, and the assembler replaces them."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def stream_error(body: Any, provider: str, fallback: str) -> ModelError:
    """The error an event inside a stream reports (sent after a 200, so no status)."""
    message, kind, code = error_details(body)
    return classify(None, message or fallback, provider=provider, error_type=kind, code=code)
