"""Anthropic Messages API (needs the optional ``anthropic`` package).

Here live Anthropic's rules: the system prompt is a parameter, tool results are blocks of a
user turn (consecutive results merged into one), thinking blocks go back with their
signatures only to the model that wrote them, tool-use ids match ``[a-zA-Z0-9_-]+``, and
the system prompt and tool definitions are marked for prompt caching.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..errors import AuthenticationError, InvalidResponse, ModelError, Unavailable
from ..messages import ImagePart, Message, Part, ReasoningPart, TextPart, Usage
from ._errors import classify, error_details, retry_after_seconds
from ._sdk import ClientPerLoop, is_transport_error, model_stream
from .assembler import StreamAssembler
from .base import ModelRequest, StreamItem, ToolSpec
from .models import model_limits

if TYPE_CHECKING:
    import anthropic

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
_CACHE = {"type": "ephemeral"}
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                 "max_tokens": "length", "model_context_window_exceeded": "length",
                 "refusal": "content_filter"}
_TOOL_ID = re.compile(r"[^a-zA-Z0-9_-]")
_DATA_URL = re.compile(r"^data:(?P<type>[\w/+.-]+);base64,(?P<data>.*)$", re.DOTALL)


class AnthropicModel:
    """A Claude model: ``AnthropicModel("claude-sonnet-4-5")``.

    ``api_key`` and ``base_url`` default to ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``.
    ``thinking_budget`` turns on extended thinking with that many tokens.
    """

    provider = "anthropic"

    def __init__(self, name: str, *, base_url: str | None = None, api_key: str | None = None,
                 context_window: int | None = None, max_output_tokens: int | None = None,
                 timeout: float = 120.0, temperature: float | None = None,
                 thinking_budget: int | None = None, cache_prompt: bool = True) -> None:
        self.model_id = name
        self.name = f"{self.provider}/{name}"
        base = base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_BASE_URL
        # The SDK adds "/v1" itself; accept the OpenAI-style ".../v1" users often pass.
        self.base_url = base.rstrip("/").removesuffix("/v1")
        limits = model_limits(name, context_window=context_window,
                              max_output_tokens=max_output_tokens)
        self.context_window = limits.context_window
        self.max_output_tokens: int | None = limits.max_output_tokens
        self.timeout = timeout
        self.temperature = temperature
        self.thinking_budget = thinking_budget
        self.cache_prompt = cache_prompt
        self._api_key = api_key
        self._clients: ClientPerLoop[anthropic.AsyncAnthropic] = ClientPerLoop(self._make_client)

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_id!r}, base_url={self.base_url!r})"

    def _make_client(self) -> anthropic.AsyncAnthropic:
        key = self._api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise AuthenticationError(
                "no Anthropic API key: set the ANTHROPIC_API_KEY environment variable or pass "
                "api_key=...", provider=self.provider)
        import anthropic

        # The loop retries transient errors itself, with its own backoff and events.
        return anthropic.AsyncAnthropic(api_key=key, base_url=self.base_url,
                                        timeout=self.timeout, max_retries=0)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one message: deltas as they arrive, then the ``ModelResponse``."""
        return model_stream(
            lambda: self._clients.get().messages.create(**self.body(request)), self._read,
            self._model_error)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API request body for ``request``."""
        system, messages = to_wire_messages(request.messages, self.name)
        body: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": request.max_tokens or self.max_output_tokens,
            "messages": messages,
            "stream": True,
        }
        if system:
            block: dict[str, Any] = {"type": "text", "text": system}
            if self.cache_prompt:
                block["cache_control"] = _CACHE
            body["system"] = [block]
        if request.tools:
            body["tools"] = _wire_tools(request.tools, self.cache_prompt)
            choice = _tool_choice(request)
            if choice:
                body["tool_choice"] = choice
        if self.thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    async def _read(self, events: Any) -> AsyncIterator[StreamItem]:
        out = StreamAssembler(self.name)
        usage = Usage()
        calls: dict[int, int] = {}  # content-block index -> tool-call slot
        thinking: dict[int, ReasoningPart] = {}  # content-block index -> its thinking
        stop_reason: str | None = None
        started = False
        async for event in events:
            kind = event.type
            if kind == "message_start":
                started = True
                _add_usage(usage, event.message.usage)
            elif kind == "content_block_start":
                block = event.content_block
                if block.type == "tool_use":
                    calls[event.index] = len(calls)
                    for item in out.tool_call(calls[event.index], block.id, block.name):
                        yield item
                elif block.type == "thinking":
                    thinking[event.index] = ReasoningPart(block.thinking or "",
                                                          block.signature or None, self.name)
                elif block.type == "redacted_thinking":
                    thinking[event.index] = ReasoningPart(block.data, None, self.name, True)
                elif block.type == "text" and block.text:
                    yield out.text(block.text)
            elif kind == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta":
                    yield out.text(delta.text)
                elif delta.type == "thinking_delta":
                    thinking[event.index].text += delta.thinking
                    yield out.reasoning(delta.thinking)
                elif delta.type == "signature_delta":
                    thinking[event.index].signature = delta.signature
                elif delta.type == "input_json_delta" and delta.partial_json:
                    for item in out.tool_call(calls[event.index], arguments=delta.partial_json):
                        yield item
            elif kind == "message_delta":
                stop_reason = event.delta.stop_reason
                _add_usage(usage, event.usage)
        if not started:
            raise InvalidResponse(f"the stream from {self.base_url} ended without a message",
                                  provider=self.provider)
        response = out.finish(usage, _STOP_REASONS.get(stop_reason or "end_turn", stop_reason))
        # The assembler keeps one reasoning part; Claude may write several thinking blocks,
        # each verified by its own signature, so they are kept apart.
        message = response.message
        message.content = [*(thinking[i] for i in sorted(thinking)),
                           *(p for p in message.content if type(p) is not ReasoningPart)]
        yield response

    def _model_error(self, exc: BaseException, opened: bool) -> ModelError | None:
        import anthropic

        if isinstance(exc, anthropic.APIStatusError):
            message, kind, code = error_details(exc.body)
            # An error event inside a stream arrives with the stream's status, 200.
            status = exc.status_code if exc.status_code >= 400 else None
            return classify(status, message or exc.message, provider=self.provider,
                            error_type=kind, code=code,
                            retry_after=retry_after_seconds(exc.response.headers))
        if isinstance(exc, anthropic.APITimeoutError):
            return Unavailable(f"timed out waiting for {self.base_url}", provider=self.provider)
        if isinstance(exc, anthropic.APIConnectionError) and not opened:
            return Unavailable(f"could not connect to {self.base_url}: {exc.__cause__ or exc}",
                               provider=self.provider)
        if is_transport_error(exc) or isinstance(exc, anthropic.APIConnectionError):
            return Unavailable(f"the connection to {self.base_url} broke mid-stream: "
                               f"{exc.__cause__ or exc}", provider=self.provider)
        if isinstance(exc, json.JSONDecodeError):
            return InvalidResponse(f"malformed event in the stream from {self.base_url}: {exc}",
                                   provider=self.provider)
        return None


def _add_usage(usage: Usage, raw: Any) -> None:
    """Fold one usage report in; Anthropic's input counts exclude cache reads and writes."""
    if raw is None:
        return
    output = getattr(raw, "output_tokens", None)
    if output is not None:
        usage.output_tokens = output  # cumulative, the last report wins
    uncached = getattr(raw, "input_tokens", None)
    if uncached is None:  # message_delta without input counts
        return
    read = getattr(raw, "cache_read_input_tokens", None) or 0
    written = getattr(raw, "cache_creation_input_tokens", None) or 0
    usage.input_tokens = uncached + read + written
    usage.cached_input_tokens = read
    usage.cache_write_tokens = written


def _wire_tools(tools: list[ToolSpec], cache: bool) -> list[dict[str, Any]]:
    wire = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools]
    if cache:  # one breakpoint on the last tool caches them all
        wire[-1]["cache_control"] = _CACHE
    return wire


def _tool_choice(request: ModelRequest) -> dict[str, Any] | None:
    if request.forced_tool:
        choice: dict[str, Any] = {"type": "tool", "name": request.forced_tool}
    elif request.tool_choice == "required":
        choice = {"type": "any"}
    elif request.tool_choice == "none":
        return {"type": "none"}
    elif request.parallel_tool_calls:
        return None
    else:
        choice = {"type": "auto"}
    if not request.parallel_tool_calls:
        choice["disable_parallel_tool_use"] = True
    return choice


def wire_id(id: str) -> str:
    """A tool-use id Anthropic accepts (``[a-zA-Z0-9_-]+``), the same for a call and its result."""
    clean = _TOOL_ID.sub("_", id)
    if clean == id and id:
        return id
    return f"{clean}_{hashlib.sha256(id.encode()).hexdigest()[:8]}"


def to_wire_messages(messages: list[Message], model: str) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` for the Messages API; ``model`` decides which thinking is kept."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in messages:
        if message.role == "system":
            if turns:  # a system note mid-transcript becomes user text
                add("user", _text_blocks(message.content))
            else:
                system.append(message.text)
        elif message.role == "user":
            add("user", _user_blocks(message.content))
        elif message.role == "assistant":
            add("assistant", _assistant_blocks(message, model))
        else:
            result: dict[str, Any] = {"type": "tool_result",
                                      "tool_use_id": wire_id(message.tool_call_id or "")}
            if message.text:
                result["content"] = message.text
            if message.is_error:
                result["is_error"] = True
            add("user", [result])
    for turn in turns:  # tool results must open their user turn
        if turn["role"] == "user":
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return "\n\n".join(s for s in system if s), turns


def _assistant_blocks(message: Message, model: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.content:
        if type(part) is ReasoningPart:
            if part.model == model and part.redacted:
                blocks.append({"type": "redacted_thinking", "data": part.text})
            elif part.model == model and part.signature:
                blocks.append({"type": "thinking", "thinking": part.text,
                               "signature": part.signature})
            elif part.text and not part.redacted:  # another model's reasoning: plain text
                blocks.append({"type": "text", "text": f"<reasoning>{part.text}</reasoning>"})
        elif type(part) is TextPart and part.text:
            blocks.append({"type": "text", "text": part.text})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": wire_id(call.id), "name": call.name,
                       "input": call.arguments})
    return blocks


def _text_blocks(parts: list[Part]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": p.text} for p in parts if type(p) is TextPart and p.text]


def _user_blocks(parts: list[Part]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if type(part) is TextPart and part.text:
            blocks.append({"type": "text", "text": part.text})
        elif type(part) is ImagePart:
            match = _DATA_URL.match(part.url)
            source = ({"type": "base64", "media_type": part.media_type or match["type"],
                       "data": match["data"]} if match else {"type": "url", "url": part.url})
            blocks.append({"type": "image", "source": source})
    return blocks
