"""OpenAI Chat Completions: OpenAI itself and every server that speaks its wire format
(vLLM, Ollama, llama.cpp server, LM Studio, OpenRouter).

The quirks of those servers are handled here and nowhere else: reasoning sent as
``reasoning_content`` or ``reasoning``; tool calls whose id and name come only on the first
fragment, or whole in one chunk, or without an index; ``finish_reason`` "stop" after tool
calls; servers that reject the ``developer`` role or one of ``max_tokens`` /
``max_completion_tokens``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from ..errors import AuthenticationError, InvalidResponse, ModelError, Unavailable
from ..messages import ImagePart, Message, TextPart, Usage
from ._errors import classify, error_details, retry_after_seconds
from ._sdk import ClientPerLoop, is_transport_error, model_stream
from .assembler import StreamAssembler
from .base import ModelRequest, StreamItem
from .models import model_limits

if TYPE_CHECKING:
    import openai

OPENAI_BASE_URL = "https://api.openai.com/v1"
_REASONING_MODELS = ("o1", "o3", "o4", "gpt-5")
_MAX_ID_LENGTH = 40  # OpenAI rejects longer tool-call ids


class OpenAIModel:
    """A model behind a Chat Completions endpoint: ``OpenAIModel("gpt-4o-mini")``.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``. A
    server other than OpenAI's needs no key. ``context_window`` and ``max_output_tokens``
    override the model registry. ``system_role`` and ``max_tokens_field`` are chosen from
    the base URL and model when not given, and corrected once if the server rejects them.
    """

    provider = "openai"

    def __init__(self, name: str, *, base_url: str | None = None, api_key: str | None = None,
                 context_window: int | None = None, max_output_tokens: int | None = None,
                 timeout: float = 120.0, temperature: float | None = None,
                 reasoning_effort: str | None = None,
                 extra_body: dict[str, Any] | None = None,
                 system_role: Literal["system", "developer"] | None = None,
                 max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None,
                 ) -> None:
        self.model_id = name
        self.name = f"{self.provider}/{name}"
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
                         ).rstrip("/")
        limits = model_limits(name, context_window=context_window,
                              max_output_tokens=max_output_tokens)
        self.context_window = limits.context_window
        self.max_output_tokens: int | None = limits.max_output_tokens
        self.timeout = timeout
        self.temperature = temperature
        self.reasoning_effort = reasoning_effort
        self.extra_body = extra_body
        self._api_key = api_key
        self._max_tokens_override = max_output_tokens
        official = self.base_url == OPENAI_BASE_URL
        # Only OpenAI's reasoning models want "developer"; many other servers reject it.
        self._system_role = system_role or (
            "developer" if official and name.startswith(_REASONING_MODELS) else "system")
        # OpenAI deprecated max_tokens (its reasoning models reject it); other servers may
        # know only max_tokens.
        self._max_tokens_field = max_tokens_field or (
            "max_completion_tokens" if official else "max_tokens")
        self._clients: ClientPerLoop[openai.AsyncOpenAI] = ClientPerLoop(self._make_client)

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model_id!r}, base_url={self.base_url!r})"

    def _make_client(self) -> openai.AsyncOpenAI:
        key = self._api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if self.base_url == OPENAI_BASE_URL:
                raise AuthenticationError(
                    "no OpenAI API key: set the OPENAI_API_KEY environment variable or pass "
                    "api_key=...", provider=self.provider)
            key = "none"  # local servers accept any key; the SDK insists on one
        import openai

        # The loop retries transient errors itself, with its own backoff and events.
        return openai.AsyncOpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout,
                                  max_retries=0)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one completion: deltas as they arrive, then the ``ModelResponse``."""
        return model_stream(lambda: self._open(self._clients.get(), request), self._read,
                            self._model_error)

    async def _open(self, client: openai.AsyncOpenAI, request: ModelRequest) -> Any:
        import openai

        for attempt in range(3):  # at most: drop the developer role, switch the max-tokens field
            try:
                return await client.chat.completions.create(**self._body(request))
            except openai.BadRequestError as exc:
                message = error_details(exc.body)[0] or ""
                if attempt == 2 or not self._adapt_to(message):
                    raise
        raise AssertionError("unreachable")

    def _adapt_to(self, message: str) -> bool:
        """Learn from a server rejecting the developer role or a max-tokens field; True to retry."""
        lowered = message.lower()
        if self._system_role == "developer" and "developer" in lowered:
            self._system_role = "system"
            return True
        field = self._max_tokens_field
        if f"'{field}'" in lowered and "not supported" in lowered:
            self._max_tokens_field = ("max_tokens" if field == "max_completion_tokens"
                                      else "max_completion_tokens")
            return True
        return False

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": to_wire_messages(request.messages, self._system_role),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [{"type": "function", "function": spec.to_dict()}
                             for spec in request.tools]
            if request.forced_tool:
                body["tool_choice"] = {"type": "function",
                                       "function": {"name": request.forced_tool}}
            elif request.tool_choice != "auto":
                body["tool_choice"] = request.tool_choice
            if not request.parallel_tool_calls:  # the default is True; some servers lack it
                body["parallel_tool_calls"] = False
        max_tokens = request.max_tokens or self._max_tokens_override
        if max_tokens:
            body[self._max_tokens_field] = max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.reasoning_effort is not None:
            body["reasoning_effort"] = self.reasoning_effort
        if self.extra_body:
            body["extra_body"] = self.extra_body
        return body

    async def _read(self, chunks: Any) -> AsyncIterator[StreamItem]:
        out = StreamAssembler(self.name)
        slots = _CallSlots()
        usage = None
        finish_reason: str | None = None
        answered = False
        async for chunk in chunks:
            if getattr(chunk, "usage", None):
                usage = usage_from_openai(chunk.usage)
            for choice in chunk.choices or ():
                answered = True
                delta = choice.delta
                if delta is not None:
                    for item in _delta_items(out, slots, delta):
                        yield item
                if choice.finish_reason:
                    finish_reason = choice.finish_reason
        if not answered:
            raise InvalidResponse(f"the stream from {self.base_url} ended without a response",
                                  provider=self.provider)
        response = out.finish(usage, finish_reason)
        response.finish_reason = _normal_finish(finish_reason, bool(response.message.tool_calls))
        yield response

    def _model_error(self, exc: BaseException, opened: bool) -> ModelError | None:
        import openai

        if isinstance(exc, openai.APIStatusError):
            message, kind, code = error_details(exc.body)
            return classify(exc.status_code, message or exc.response.text or str(exc),
                            provider=self.provider, error_type=kind, code=code,
                            retry_after=retry_after_seconds(exc.response.headers))
        if isinstance(exc, openai.APITimeoutError):
            return Unavailable(f"timed out waiting for {self.base_url}", provider=self.provider)
        if isinstance(exc, openai.APIConnectionError) and not opened:
            return Unavailable(f"could not connect to {self.base_url}: {exc.__cause__ or exc}",
                               provider=self.provider)
        if is_transport_error(exc) or isinstance(exc, openai.APIConnectionError):
            return Unavailable(f"the connection to {self.base_url} broke mid-stream: "
                               f"{exc.__cause__ or exc}", provider=self.provider)
        if isinstance(exc, openai.APIError):  # an error event inside the stream
            message, kind, code = error_details(exc.body)
            return classify(None, message or exc.message, provider=self.provider,
                            error_type=kind, code=code)
        if isinstance(exc, json.JSONDecodeError):
            return InvalidResponse(f"malformed chunk in the stream from {self.base_url}: {exc}",
                                   provider=self.provider)
        return None


class _CallSlots:
    """Maps the provider's tool-call index (or, when a server omits it, the id) to a slot."""

    __slots__ = ("_ids", "_last")

    def __init__(self) -> None:
        self._ids: dict[int, str | None] = {}
        self._last = -1

    def slot(self, index: int | None, id: str | None) -> int:
        if index is None:  # no index: a new id starts a new call, fragments continue the last
            if self._last < 0 or (id and id != self._ids[self._last]):
                self._last += 1
                self._ids[self._last] = id
            return self._last
        if index not in self._ids:
            self._ids[index] = id
        self._last = max(self._last, index)
        return index


def _delta_items(out: StreamAssembler, slots: _CallSlots, delta: Any) -> list[StreamItem]:
    items: list[StreamItem] = []
    # DeepSeek and older vLLM say reasoning_content; OpenRouter, Ollama, newer vLLM say
    # reasoning. Some send both with the same text, so take one.
    reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
    if isinstance(reasoning, str) and reasoning:
        items.append(out.reasoning(reasoning))
    if delta.content:
        items.append(out.text(delta.content))
    for call in getattr(delta, "tool_calls", None) or ():
        function = getattr(call, "function", None)
        name = getattr(function, "name", None) or None
        arguments = getattr(function, "arguments", None) or ""
        if not isinstance(arguments, str):  # a few servers send the parsed object
            arguments = json.dumps(arguments)
        id = getattr(call, "id", None) or None
        items += out.tool_call(slots.slot(getattr(call, "index", None), id), id, name, arguments)
    return items


def _normal_finish(reason: str | None, has_calls: bool) -> str:
    """OpenAI's vocabulary; servers that say "stop" (or nothing) after tool calls are fixed."""
    if has_calls and reason in (None, "stop", "eos", "function_call", "tool_calls"):
        return "tool_calls"
    return reason or "stop"


def usage_from_openai(raw: Any) -> Usage:
    """``Usage`` from an OpenAI usage object; cached and reasoning tokens are subsets."""
    prompt = getattr(raw, "prompt_tokens_details", None)
    completion = getattr(raw, "completion_tokens_details", None)
    return Usage(
        input_tokens=getattr(raw, "prompt_tokens", 0) or 0,
        output_tokens=getattr(raw, "completion_tokens", 0) or 0,
        cached_input_tokens=getattr(prompt, "cached_tokens", 0) or 0,
        reasoning_tokens=getattr(completion, "reasoning_tokens", 0) or 0,
    )


def wire_id(id: str) -> str:
    """A tool-call id OpenAI accepts, the same for a call and its result."""
    if id and len(id) <= _MAX_ID_LENGTH:
        return id
    return "call_" + hashlib.sha256(id.encode()).hexdigest()[:_MAX_ID_LENGTH - 5]


def to_wire_messages(messages: list[Message], system_role: str = "system") -> list[dict[str, Any]]:
    """Transcript messages as Chat Completions messages.

    Reasoning is not sent back: Chat Completions has no field for it, and servers that emit
    ``reasoning_content`` reject it on input.
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            wire.append({"role": system_role, "content": message.text})
        elif message.role == "user":
            wire.append({"role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {"id": wire_id(call.id), "type": "function",
                     "function": {"name": call.name,
                                  "arguments": call.raw_arguments
                                  if call.raw_arguments is not None
                                  else json.dumps(call.arguments)}}
                    for call in message.tool_calls]
            elif entry["content"] is None:
                entry["content"] = ""
            wire.append(entry)
        else:
            wire.append({"role": "tool", "tool_call_id": wire_id(message.tool_call_id or ""),
                         "content": message.text})
    return wire


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if all(type(part) is TextPart for part in message.content):
        return message.text
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if type(part) is TextPart:
            parts.append({"type": "text", "text": part.text})
        elif type(part) is ImagePart:
            parts.append({"type": "image_url", "image_url": {"url": part.url}})
    return parts

