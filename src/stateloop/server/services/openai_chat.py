"""A run's Letta frames as OpenAI chat completions: the ``chat.completion`` object a whole
answer is, and the ``chat.completion.chunk`` SSE events a streamed one is.

Only the agent's assistant text is shown, as Letta shows it: tool calls the agent makes run
on the server and are not OpenAI tool calls. The texts of the run's assistant messages are
joined by a blank line, in both shapes, so a streamed answer reads as the whole one does.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from .messages import Frame

DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": ping\n\n"  # an SSE comment: OpenAI's clients skip it
SEPARATOR = "\n\n"  # between two assistant messages of one run


def frame_text(frame: Frame) -> str:
    """The text of an ``assistant_message`` frame (its content is a string or text parts)."""
    content = frame.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def usage(frame: Frame) -> dict[str, int]:
    """OpenAI's ``usage`` from a ``usage_statistics`` frame."""
    prompt = int(frame.get("prompt_tokens") or 0)
    completion = int(frame.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": int(frame.get("total_tokens") or prompt + completion)}


def finish_reason(stop_reason: str | None) -> str:
    """``length`` when the run stopped at its step or token limit, else ``stop``."""
    return "length" if stop_reason in ("max_steps", "max_tokens_exceeded") else "stop"


@dataclass(slots=True)
class Assistant:
    """The assistant text of a run as its frames come: what each frame adds, separators
    included."""

    text: list[str] = field(default_factory=list)
    _message_id: str | None = None

    def add(self, frame: Frame) -> str:
        """The text ``frame`` adds ("" for a frame that is not assistant text)."""
        if frame.get("message_type") != "assistant_message":
            return ""
        piece = frame_text(frame)
        if not piece:
            return ""
        if self.text and frame.get("id") != self._message_id:
            piece = SEPARATOR + piece
        self._message_id = frame.get("id")
        self.text.append(piece)
        return piece


def completion(completion_id: str, model: str, text: str, stop_reason: str | None,
               usage_frame: Frame) -> dict[str, Any]:
    """A whole answer as OpenAI's ``chat.completion``."""
    return {"id": completion_id, "object": "chat.completion", "created": int(time.time()),
            "model": model, "system_fingerprint": None,
            "choices": [{"index": 0, "finish_reason": finish_reason(stop_reason),
                         "logprobs": None,
                         "message": {"role": "assistant", "content": text,
                                     "refusal": None}}],
            "usage": usage(usage_frame)}


async def chunks(frames: AsyncIterator[Frame | None], completion_id: str, model: str, *,
                 include_usage: bool = False) -> AsyncIterator[bytes]:
    """The run's ``frames`` as SSE ``chat.completion.chunk`` events, then ``[DONE]``; a run
    that fails ends with OpenAI's ``{"error": ...}`` event, which its clients raise."""
    created = int(time.time())

    def event(delta: dict[str, Any], reason: str | None = None,
              **extra: Any) -> bytes:
        chunk = {"id": completion_id, "object": "chat.completion.chunk", "created": created,
                 "model": model, "system_fingerprint": None,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": reason,
                              "logprobs": None}], **extra}
        return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"

    assistant = Assistant()
    stop_reason: str | None = None
    async for frame in frames:
        if frame is None:
            yield KEEPALIVE
            continue
        kind = frame.get("message_type")
        if kind == "error_message":
            error = {"message": frame.get("message") or "the run failed",
                     "type": "server_error", "param": None,
                     "code": frame.get("error_type")}
            yield b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
            yield DONE
            return
        if kind == "stop_reason":
            stop_reason = frame.get("stop_reason")
        elif kind == "usage_statistics":
            yield event({}, finish_reason(stop_reason))
            if include_usage:
                yield b"data: " + json.dumps({
                    "id": completion_id, "object": "chat.completion.chunk",
                    "created": created, "model": model, "choices": [],
                    "usage": usage(frame)}, separators=(",", ":")).encode() + b"\n\n"
        else:
            piece = assistant.add(frame)
            if piece:
                delta = {"content": piece}
                if len(assistant.text) == 1:
                    delta = {"role": "assistant", **delta}
                yield event(delta)
    yield DONE
