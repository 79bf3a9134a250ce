"""Anthropic Messages API, spoken over HTTP directly (no SDK needed).

Here live Anthropic's rules: the system prompt is a parameter, tool results are blocks of a
user turn (consecutive results merged into one), thinking blocks go back with their
signatures only to the model that wrote them, tool-use ids match ``[a-zA-Z0-9_-]+``, and
the system prompt and tool definitions are marked for prompt caching.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from ..errors import AuthenticationError, InvalidRequest, InvalidResponse
from ..messages import ImagePart, Message, Part, ReasoningPart, TextPart, Usage
from ._http import loads, model_stream, post_stream, server_sent_events, stream_error
from .assembler import StreamAssembler
from .base import ModelRequest, StreamItem, ToolSpec
from .models import model_limits
from .pieces import Encoded, KeptTurns, dumps

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
_CACHE = {"type": "ephemeral"}
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                 "max_tokens": "length", "model_context_window_exceeded": "length",
                 "refusal": "content_filter"}
_TOOL_ID = re.compile(r"[^a-zA-Z0-9_-]")
_DATA_URL = re.compile(r"^data:(?P<type>[\w/+.-]+);base64,(?P<data>.*)$", re.DOTALL)


class AnthropicModel:
    """A Claude model: ``AnthropicModel("claude-sonnet-4-5")``.

    ``api_key`` and ``base_url`` default to ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``.
    ``thinking_budget`` turns on extended thinking with that many tokens. ``provider`` names
    a service that speaks the same wire format (``minimax/MiniMax-M2``).
    """

    provider = "anthropic"

    def __init__(self, name: str, *, base_url: str | None = None, api_key: str | None = None,
                 context_window: int | None = None, max_output_tokens: int | None = None,
                 timeout: float = 120.0, temperature: float | None = None,
                 thinking_budget: int | None = None, cache_prompt: bool = True,
                 provider: str = "anthropic") -> None:
        self.provider = provider
        self.model_id = name
        self.name = f"{provider}/{name}"
        base = base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_BASE_URL
        # The API's paths start with "/v1"; accept the OpenAI-style ".../v1" users often pass.
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
        self._turns = KeptTurns(lambda m: _encoded(m, self.name), b"content")

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_id!r}, base_url={self.base_url!r})"

    def _headers(self) -> dict[str, str]:
        key = self._api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise AuthenticationError(
                "no Anthropic API key: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a "
                "compatible server) where the model is called; or give the agent another "
                "model (--model; demo/echo needs no provider)", provider=self.provider)
        return {"x-api-key": key, "anthropic-version": API_VERSION,
                "content-type": "application/json", "accept": "text/event-stream"}

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one message: deltas as they arrive, then the ``ModelResponse``."""
        return model_stream(
            lambda: post_stream(f"{self.base_url}/v1/messages", self.body(request),
                                self._headers(), self.timeout, provider=self.provider),
            self._read, self.base_url, self.provider)

    def body(self, request: ModelRequest) -> bytes:
        """The Messages API request body: its small fields serialized anew, the turns from
        kept pieces."""
        messages = request.messages
        start = 0
        while start < len(messages) and messages[start].role == "system":
            start += 1
        system = "\n\n".join(m.text for m in messages[:start] if m.text)
        head: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": request.max_tokens or self.max_output_tokens,
            "stream": True,
        }
        if system:
            block: dict[str, Any] = {"type": "text", "text": system}
            if self.cache_prompt:
                block["cache_control"] = _CACHE
            head["system"] = [block]
        if request.tools:
            head["tools"] = _wire_tools(request.tools, self.cache_prompt)
            choice = _tool_choice(request)
            if choice:
                head["tool_choice"] = choice
        settings = request.settings
        if settings.response_format and settings.response_format.get("type") != "text":
            # Claude has no JSON mode: ``output_type`` uses a final-answer tool instead.
            raise InvalidRequest("Anthropic models take no response_format but text; use "
                                 "output_type (a final-answer tool) for structured output",
                                 provider=self.provider)
        budget = _first(settings.thinking_budget, self.thinking_budget)
        if budget:
            head["thinking"] = {"type": "enabled", "budget_tokens": budget}
        temperature = _first(settings.temperature, self.temperature)
        if temperature is not None:
            head["temperature"] = temperature
        turns = self._turns.turns(messages, start)
        return b"".join((dumps(head)[:-1], b',"messages":[', turns, b"]}"))

    async def _read(self, response: httpx2.Response) -> AsyncIterator[StreamItem]:
        out = StreamAssembler(self.name)
        usage = Usage()
        calls: dict[int, int] = {}  # content-block index -> tool-call slot
        thinking: dict[int, ReasoningPart] = {}  # content-block index -> its thinking
        stop_reason: str | None = None
        started = False
        async for name, data in server_sent_events(response):
            event = loads(data)
            kind = event.get("type") if isinstance(event, dict) else None
            if name == "error" or kind == "error":
                raise stream_error(event, self.provider, data)
            if kind == "message_start":
                started = True
                _add_usage(usage, event["message"].get("usage"))
            elif kind == "content_block_start":
                block = event["content_block"]
                index = event["index"]
                if block["type"] == "tool_use":
                    calls[index] = len(calls)
                    for item in out.tool_call(calls[index], block["id"], block["name"]):
                        yield item
                elif block["type"] == "thinking":
                    thinking[index] = ReasoningPart(block.get("thinking") or "",
                                                    block.get("signature") or None, self.name)
                elif block["type"] == "redacted_thinking":
                    thinking[index] = ReasoningPart(block["data"], None, self.name, True)
                elif block["type"] == "text" and block.get("text"):
                    yield out.text(block["text"])
            elif kind == "content_block_delta":
                delta, index = event["delta"], event["index"]
                if delta["type"] == "text_delta":
                    yield out.text(delta["text"])
                elif delta["type"] == "thinking_delta":
                    thinking[index].text += delta["thinking"]
                    yield out.reasoning(delta["thinking"])
                elif delta["type"] == "signature_delta":
                    thinking[index].signature = delta["signature"]
                elif delta["type"] == "input_json_delta" and delta.get("partial_json"):
                    for item in out.tool_call(calls[index], arguments=delta["partial_json"]):
                        yield item
            elif kind == "message_delta":
                stop_reason = event["delta"].get("stop_reason")
                _add_usage(usage, event.get("usage"))
        if not started:
            raise InvalidResponse(f"the stream from {self.base_url} ended without a message",
                                  provider=self.provider)
        result = out.finish(usage, _STOP_REASONS.get(stop_reason or "end_turn", stop_reason))
        # The assembler keeps one reasoning part; Claude may write several thinking blocks,
        # each verified by its own signature, so they are kept apart.
        message = result.message
        message.content = [*(thinking[i] for i in sorted(thinking)),
                           *(p for p in message.content if type(p) is not ReasoningPart)]
        yield result


def _first(asked: Any, own: Any) -> Any:
    """The request's setting, else the model's own."""
    return asked if asked is not None else own


def _add_usage(usage: Usage, raw: dict[str, Any] | None) -> None:
    """Fold one usage report in; Anthropic's input counts exclude cache reads and writes."""
    if not raw:
        return
    output = raw.get("output_tokens")
    if output is not None:
        usage.output_tokens = output  # cumulative, the last report wins
    uncached = raw.get("input_tokens")
    if uncached is None:  # message_delta without input counts
        return
    read = raw.get("cache_read_input_tokens") or 0
    written = raw.get("cache_creation_input_tokens") or 0
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
    start = 0
    while start < len(messages) and messages[start].role == "system":
        start += 1
    turns: list[dict[str, Any]] = []
    for message in messages[start:]:
        role, blocks = message_blocks(message, model)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:  # tool results must open their user turn
        if turn["role"] == "user":
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return "\n\n".join(m.text for m in messages[:start] if m.text), turns


def message_blocks(message: Message, model: str) -> tuple[str, list[dict[str, Any]]]:
    """The role and content blocks of a message after the leading system prompt; messages
    of one role in a row make one turn."""
    if message.role == "system":  # a system note mid-transcript becomes user text
        return "user", _text_blocks(message.content)
    if message.role == "user":
        return "user", _user_blocks(message.content)
    if message.role == "assistant":
        return "assistant", _assistant_blocks(message, model)
    result: dict[str, Any] = {"type": "tool_result",
                              "tool_use_id": wire_id(message.tool_call_id or "")}
    if message.text:
        result["content"] = message.text
    if message.is_error:
        result["is_error"] = True
    return "user", [result]


def _encoded(message: Message, model: str) -> Encoded:
    """A message's role, its tool results' JSON and its other blocks' JSON."""
    role, blocks = message_blocks(message, model)
    results = [dumps(b) for b in blocks if b["type"] == "tool_result"]
    return role, results, [dumps(b) for b in blocks if b["type"] != "tool_result"]


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
