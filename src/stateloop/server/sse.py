"""Server-sent events in Letta's framing: ``data: {json}`` per frame, then ``data: [DONE]``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi.responses import StreamingResponse

from .services.messages import Frame, ping_frame

# Frames that are not Letta messages pass every include_return_message_types filter.
_ALWAYS = frozenset({"stop_reason", "usage_statistics", "error_message", "ping"})


def wanted(frame: Frame, include: list[str] | None) -> bool:
    """Whether ``include_return_message_types`` lets ``frame`` through."""
    return include is None or frame.get("message_type") in _ALWAYS or (
        frame.get("message_type") in include)


def event_stream(frames: AsyncIterator[Frame | None], *, include: list[str] | None = None,
                 pings: bool = True, run_id: str | None = None) -> StreamingResponse:
    """An SSE response of ``frames``; a ``None`` frame is a quiet interval (a ping)."""

    async def body() -> AsyncIterator[bytes]:
        async for frame in frames:
            if frame is None:
                if pings:
                    yield _encode(ping_frame(run_id))
                continue
            if wanted(frame, include):
                yield _encode(frame)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _encode(frame: Frame) -> bytes:
    return b"data: " + json.dumps(frame, separators=(",", ":")).encode() + b"\n\n"
