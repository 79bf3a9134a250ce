"""A model that plays a script: deterministic agent runs for tests, examples and benchmarks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import MODEL_ERRORS, StateloopError
from ..events import ReasoningDelta, TextDelta, ToolCallDelta, ToolCallStart
from ..llm.assembler import parse_tool_call
from ..llm.base import ModelRequest, ModelResponse, StreamItem
from ..messages import Message, Part, ReasoningPart, TextPart, ToolCall, Usage, new_call_id


@dataclass(slots=True)
class Reply:
    text: str
    reasoning: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None


@dataclass(slots=True)
class Call:
    name: str
    arguments: dict[str, Any]
    id: str | None = None
    raw_arguments: str | None = None  # sent instead of ``arguments``: for malformed JSON


@dataclass(slots=True)
class Calls:
    calls: list[Call]
    text: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None


@dataclass(slots=True)
class ErrorReply:
    kind: str
    message: str
    retry_after: float | None = None
    status_code: int | None = None


ScriptItem = Reply | Call | Calls | ErrorReply
Script = Sequence[ScriptItem] | Callable[[ModelRequest], ScriptItem]


def reply(text: str, *, reasoning: str = "", finish_reason: str | None = None,
          usage: Usage | None = None) -> Reply:
    """The model answers with text (and no tool call)."""
    return Reply(text, reasoning, finish_reason, usage)


def call(name: str, /, **arguments: Any) -> Call:
    """The model calls one tool with these arguments."""
    return Call(name, arguments)


def raw_call(name: str, raw_arguments: str, id: str | None = None) -> Call:
    """The model calls a tool with exactly this argument text (which need not be valid JSON)."""
    return Call(name, {}, id, raw_arguments)


def calls(*items: Call, text: str = "", finish_reason: str | None = None,
          usage: Usage | None = None) -> Calls:
    """The model calls several tools in one response (parallel calls)."""
    return Calls(list(items), text, finish_reason, usage)


_DEFAULT_ERROR_TEXT = {
    "rate_limit": "Rate limit reached; please retry.",
    "overloaded": "The model is overloaded.",
    "server_error": "Internal server error.",
    "context_overflow": "This model's maximum context length has been exceeded.",
    "invalid_request": "Invalid request.",
    "authentication": "Invalid API key.",
    "invalid_response": "The model returned an unparseable response.",
}


def error(kind: str = "rate_limit", message: str | None = None, *,
          retry_after: float | None = None) -> ErrorReply:
    """The provider fails with ``kind``: one of ``stateloop.errors.MODEL_ERRORS``."""
    if kind not in MODEL_ERRORS:
        raise ValueError(f"unknown error kind {kind!r}; expected one of {', '.join(MODEL_ERRORS)}")
    return ErrorReply(kind, message or _DEFAULT_ERROR_TEXT[kind], retry_after)


class ScriptExhausted(StateloopError):
    """The model was called more times than its script has replies."""


class ScriptedModel:
    """Plays ``script`` one item per model call, streaming like a real provider.

    ``script`` is a list of ``reply``/``call``/``calls``/``error`` items or a function that
    receives each ``ModelRequest`` and returns one. Every request is kept in ``requests``.
    """

    def __init__(self, script: Script, *, name: str = "scripted/model",
                 context_window: int = 128_000, max_output_tokens: int | None = None,
                 chunk_size: int = 8, latency: float = 0.0) -> None:
        self.name = name
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self.requests: list[ModelRequest] = []
        self._script = script
        self._position = 0
        self._chunk_size = chunk_size
        self._latency = latency
        self._counted: tuple[list[Message] | None, int, int] = (None, 0, 0)

    @property
    def remaining(self) -> int:
        """Items of a list script not played yet."""
        if callable(self._script):
            return 0
        return len(self._script) - self._position

    def _next_item(self, request: ModelRequest) -> ScriptItem:
        if callable(self._script):
            return self._script(request)
        if self._position >= len(self._script):
            raise ScriptExhausted(
                f"ScriptedModel was called {self._position + 1} times but its script has "
                f"{len(self._script)} items")
        item = self._script[self._position]
        self._position += 1
        return item

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        item = self._next_item(request)
        if self._latency:
            await asyncio.sleep(self._latency)
        if type(item) is ErrorReply:
            raise MODEL_ERRORS[item.kind](item.message, provider="scripted",
                                          status_code=item.status_code,
                                          retry_after=item.retry_after)
        if type(item) is Call:
            item = Calls([item])
        size = self._chunk_size
        content: list[Part] = []
        tool_calls: list[ToolCall] = []
        if type(item) is Reply:
            if item.reasoning:
                for piece in _chunks(item.reasoning, size):
                    yield ReasoningDelta(piece)
                content.append(ReasoningPart(item.reasoning, model=self.name))
            script_calls: list[Call] = []
        else:
            assert type(item) is Calls, f"not a script item: {item!r}"
            script_calls = item.calls
        if item.text:
            for piece in _chunks(item.text, size):
                yield TextDelta(piece)
            content.append(TextPart(item.text))
        produced = len(item.text)
        for index, c in enumerate(script_calls):
            raw = c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments)
            produced += len(raw)
            parsed = (parse_tool_call(c.id or new_call_id(), c.name, raw)
                      if c.raw_arguments is not None
                      else ToolCall(c.id or new_call_id(), c.name, dict(c.arguments), raw))
            yield ToolCallStart(index, parsed.id, parsed.name)
            for piece in _chunks(raw, size):
                yield ToolCallDelta(index, piece)
            tool_calls.append(parsed)
        usage = item.usage or Usage(self._input_tokens(request.messages), produced // 4 + 1)
        finish = item.finish_reason or ("tool_calls" if tool_calls else "stop")
        yield ModelResponse(Message("assistant", content, tool_calls), usage, finish, self.name)

    def _input_tokens(self, messages: list[Message]) -> int:
        """A rough count, kept incremental so a long transcript costs nothing extra per call."""
        previous, counted, total = self._counted
        if previous is None or counted > len(messages) or (
                counted and messages[counted - 1] is not previous[counted - 1]):
            counted, total = 0, 0
        for message in messages[counted:]:
            total += message.token_count or len(message.text) // 4 + 4
        self._counted = (messages, len(messages), total)
        return total


def _chunks(text: str, size: int) -> list[str]:
    if len(text) <= size:
        return [text] if text else []
    return [text[i:i + size] for i in range(0, len(text), size)]
