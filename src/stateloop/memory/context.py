"""Assembles the messages of a model request from the transcript, incrementally."""

from __future__ import annotations

from ..messages import Message, TextPart


def tool_return_limit(context_window: int) -> int:
    """Characters of one tool result sent to the model: max(5000, 20% of the window's ~chars)."""
    return max(5000, int(0.2 * context_window * 4))


class ContextBuilder:
    """Keeps the prepared request messages between steps so a step only prepares what is new.

    The transcript's first message is the system prompt and may be replaced at any time;
    any other change than an append (a reset, a compaction) triggers a rebuild.
    """

    __slots__ = ("_last", "_limit", "_prepared")

    def __init__(self, context_window: int) -> None:
        self._limit = tool_return_limit(context_window)
        self._prepared: list[Message] = []
        self._last: Message | None = None  # the transcript message prepared last

    def build(self, transcript: list[Message]) -> list[Message]:
        """The request messages: system prompt, then every other message, long results cut."""
        prepared = self._prepared
        seen = len(prepared) + 1
        if seen > len(transcript) or (prepared and transcript[seen - 1] is not self._last):
            prepared.clear()
            seen = 1
        for message in transcript[seen:]:
            prepared.append(self._prepare(message))
        if len(transcript) > 1:
            self._last = transcript[-1]
        return [transcript[0], *prepared]

    def _prepare(self, message: Message) -> Message:
        if message.role != "tool":
            return message
        text = message.text
        if len(text) <= self._limit:
            return message
        cut = len(text) - self._limit
        marker = f"\n... [truncated: {cut} of {len(text)} characters omitted]"
        return Message("tool", [TextPart(text[: self._limit] + marker)],
                       tool_call_id=message.tool_call_id, name=message.name,
                       is_error=message.is_error, id=message.id,
                       created_at=message.created_at, metadata=message.metadata)
