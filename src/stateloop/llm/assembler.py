"""Turns streamed fragments into events and one assistant message, alike for every provider.

A provider's JSON may carry lone surrogates (``"\\ud800"``) in text or tool-call arguments:
they become U+FFFD here, so every event and message after holds valid Unicode."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from ..deepjson import MAX_DEPTH, deeper_than
from ..events import ReasoningDelta, TextDelta, ToolCallDelta, ToolCallStart
from ..messages import Message, Part, ReasoningPart, TextPart, ToolCall, Usage, new_call_id
from ..surrogates import replace_lone_surrogates as valid
from ..surrogates import replace_lone_surrogates_in
from .base import ModelResponse


@dataclass(slots=True)
class _PendingCall:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)


class StreamAssembler:
    """Collects text, reasoning and tool-call fragments; ``finish`` builds the ``ModelResponse``.

    Tool-call fragments are keyed by the provider's index: the id and name may arrive only
    on the first fragment, the arguments split anywhere.
    """

    __slots__ = ("_calls", "_reasoning", "_signature", "_text", "model")

    def __init__(self, model: str | None = None) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._signature: str | None = None
        self._calls: dict[int, _PendingCall] = {}
        self.model = model

    def text(self, delta: str) -> TextDelta:
        delta = valid(delta)
        self._text.append(delta)
        return TextDelta(delta)

    def reasoning(self, delta: str, signature: str | None = None) -> ReasoningDelta:
        delta = valid(delta)
        self._reasoning.append(delta)
        if signature:
            self._signature = signature
        return ReasoningDelta(delta)

    def reasoning_signature(self, signature: str) -> None:
        self._signature = signature

    def tool_call(self, index: int, id: str | None = None, name: str | None = None,
                  arguments: str = "") -> list[ToolCallStart | ToolCallDelta]:
        """Feed one fragment of call ``index``; returns the events it produces."""
        events: list[ToolCallStart | ToolCallDelta] = []
        id, name, arguments = (valid(id) if id else id, valid(name) if name else name,
                               valid(arguments))
        pending = self._calls.get(index)
        if pending is None:
            pending = self._calls[index] = _PendingCall(id or new_call_id(), name or "")
            events.append(ToolCallStart(index, pending.id, pending.name))
        else:
            if id and not pending.id:
                pending.id = id
            if name and not pending.name:
                pending.name = name
        if arguments:
            pending.arguments.append(arguments)
            events.append(ToolCallDelta(index, arguments))
        return events

    def finish(self, usage: Usage | None = None, finish_reason: str | None = None) -> ModelResponse:
        content: list[Part] = []
        if self._reasoning or self._signature:
            content.append(ReasoningPart("".join(self._reasoning), self._signature, self.model))
        if self._text:
            content.append(TextPart("".join(self._text)))
        calls = [parse_tool_call(c.id, c.name, "".join(c.arguments))
                 for _, c in sorted(self._calls.items())]
        message = Message("assistant", content, calls)
        return ModelResponse(message, usage or Usage(), finish_reason, self.model)


def _not_a_number(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if number in (math.inf, -math.inf):
        raise ValueError(f"{text} is too large for a number")
    return number


def parse_tool_call(id: str, name: str, raw: str) -> ToolCall:
    """A ToolCall from its raw JSON arguments; bad JSON is kept and flagged, never raised:
    so is JSON that no client could read back (NaN, Infinity, nesting past ``MAX_DEPTH``).
    Lone surrogates, raw or escaped in the JSON, become U+FFFD."""
    id, name, raw = valid(id), valid(name), valid(raw)
    if not raw.strip():
        return ToolCall(id, name, {}, raw)
    try:
        arguments = json.loads(raw, parse_constant=_not_a_number, parse_float=_finite)
    except ValueError as exc:  # JSONDecodeError is one
        return ToolCall(id, name, {}, raw, f"arguments are not valid JSON ({exc})")
    except RecursionError:
        arguments = None
    if arguments is None or (raw.count("{") + raw.count("[") > MAX_DEPTH
                             and deeper_than(arguments, MAX_DEPTH)):
        return ToolCall(id, name, {}, raw, f"arguments nest deeper than {MAX_DEPTH} levels")
    if not isinstance(arguments, dict):
        return ToolCall(id, name, {}, raw, "arguments must be a JSON object")
    if "\\u" in raw:  # an escaped surrogate decodes to a lone one
        cleaned = replace_lone_surrogates_in(arguments)
        if cleaned != arguments:
            arguments, raw = cleaned, json.dumps(cleaned, ensure_ascii=False)
    return ToolCall(id, name, arguments, raw)
