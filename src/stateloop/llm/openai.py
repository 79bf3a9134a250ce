"""OpenAI Chat Completions: OpenAI itself and every server that speaks its wire format
(vLLM, Ollama, llama.cpp server, LM Studio, OpenRouter).

The quirks of those servers are handled here and nowhere else: reasoning sent as
``reasoning_content`` or ``reasoning``; tool calls whose id and name come only on the first
fragment, or whole in one chunk, or without an index; ``finish_reason`` "stop" after tool
calls; servers that reject the ``developer`` role, one of ``max_tokens`` /
``max_completion_tokens``, ``stream_options`` or ``parallel_tool_calls``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import httpx2

from ..errors import AuthenticationError, InvalidRequest, InvalidResponse
from ..messages import ImagePart, Message, TextPart, Usage
from ._http import loads, model_stream, post_stream, server_sent_events, stream_error
from .assembler import StreamAssembler
from .base import ModelRequest, StreamItem
from .models import model_limits
from .pieces import KeptArray, dumps

OPENAI_BASE_URL = "https://api.openai.com/v1"
_REASONING_MODELS = ("o1", "o3", "o4", "gpt-5")
_MAX_ID_LENGTH = 40  # OpenAI rejects longer tool-call ids
_MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")  # the only tool-call ids Mistral accepts
_ALNUM = string.ascii_letters + string.digits
# Optional fields some servers refuse; left out once a server names one in a 400.
_OPTIONAL_FIELDS = ("stream_options", "parallel_tool_calls")
_REFUSALS = ("support", "unrecognized", "unknown", "extra", "not allowed", "unexpected",
             "not permitted", "invalid")


class OpenAIModel:
    """A model behind a Chat Completions endpoint: ``OpenAIModel("gpt-4o-mini")``.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``. A
    server other than OpenAI's needs no key. ``context_window`` and ``max_output_tokens``
    override the model registry. ``system_role`` and ``max_tokens_field`` are chosen from
    the base URL and model when not given, and corrected once if the server rejects them.
    ``provider`` names the service in the model's name and errors (``groq/llama-3.3-70b``);
    ``chat_url`` replaces ``{base_url}/chat/completions`` (Azure's deployment URL),
    ``key_header`` is where the key goes (``authorization`` as a bearer token, else the key
    as is, as Azure's ``api-key``) and ``headers`` are sent with every call.
    ``tool_call_ids="mistral"`` sends each tool-call id as nine letters and digits (a call and
    its result alike), the only ids Mistral accepts; ids it made itself go back unchanged.
    """

    provider = "openai"
    json_schema_output = True  # takes response_format json_schema: output_type uses it

    def __init__(self, name: str, *, base_url: str | None = None, api_key: str | None = None,
                 context_window: int | None = None, max_output_tokens: int | None = None,
                 timeout: float = 120.0, temperature: float | None = None,
                 reasoning_effort: str | None = None,
                 extra_body: dict[str, Any] | None = None,
                 system_role: Literal["system", "developer"] | None = None,
                 max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None,
                 provider: str = "openai", chat_url: str | None = None,
                 key_header: str = "authorization", headers: dict[str, str] | None = None,
                 tool_call_ids: Literal["openai", "mistral"] = "openai") -> None:
        self.provider = provider
        self.model_id = name
        self.name = f"{provider}/{name}"
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
        self._chat_url = chat_url or f"{self.base_url}/chat/completions"
        self._key_header = key_header
        self._extra_headers = dict(headers or {})
        self._left_out: set[str] = set()  # optional fields this server refused
        self._max_tokens_override = max_output_tokens
        official = self.base_url == OPENAI_BASE_URL
        # Only OpenAI's reasoning models want "developer"; many other servers reject it.
        self._system_role = system_role or (
            "developer" if official and name.startswith(_REASONING_MODELS) else "system")
        # OpenAI deprecated max_tokens (its reasoning models reject it); other servers may
        # know only max_tokens.
        self._max_tokens_field = max_tokens_field or (
            "max_completion_tokens" if official else "max_tokens")
        ids = mistral_id if tool_call_ids == "mistral" else wire_id
        self._wire_id = ids
        self._kept = KeptArray(
            lambda message: dumps(wire_message(message, self._system_role, ids)))

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model_id!r}, base_url={self.base_url!r})"

    def _headers(self) -> dict[str, str]:
        key = self._api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if self.base_url == OPENAI_BASE_URL:
                raise AuthenticationError(
                    "no OpenAI API key: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local "
                    "OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio), where the "
                    "model is called; or give the agent another model (--model; demo/echo "
                    "needs no provider)", provider=self.provider)
            key = "none"  # local servers accept any key
        auth = f"Bearer {key}" if self._key_header == "authorization" else key
        return {**self._extra_headers, self._key_header: auth,
                "content-type": "application/json", "accept": "text/event-stream"}

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one completion: deltas as they arrive, then the ``ModelResponse``."""
        return model_stream(lambda: self._open(request), self._read, self.base_url,
                            self.provider)

    async def _open(self, request: ModelRequest) -> httpx2.Response:
        url = self._chat_url
        headers = self._headers()
        tries = 3 + len(_OPTIONAL_FIELDS)  # a change of role, of max-tokens field, each field
        for attempt in range(tries):
            try:
                return await post_stream(url, self.body(request), headers, self.timeout,
                                         provider=self.provider)
            except InvalidRequest as exc:
                if (exc.status_code != 400 or attempt == tries - 1
                        or not self._adapt_to(exc.message)):
                    raise
        raise AssertionError("unreachable")

    def _adapt_to(self, message: str) -> bool:
        """Learn from a server rejecting the developer role, a max-tokens field or an optional
        field; True to retry."""
        lowered = message.lower()
        for name in _OPTIONAL_FIELDS:
            if (name not in self._left_out and name in lowered
                    and any(word in lowered for word in _REFUSALS)):
                self._left_out.add(name)  # its usage or parallel calls are then the server's
                return True
        if self._system_role == "developer" and "developer" in lowered:
            self._system_role = "system"
            self._kept.clear()  # kept system messages carry the old role
            return True
        field = self._max_tokens_field
        if f"'{field}'" in lowered and "not supported" in lowered:
            self._max_tokens_field = ("max_tokens" if field == "max_completion_tokens"
                                      else "max_completion_tokens")
            return True
        return False

    def body(self, request: ModelRequest) -> bytes:
        """The request body: its small fields serialized anew, the messages from kept pieces."""
        head: dict[str, Any] = {"model": self.model_id, "stream": True}
        if "stream_options" not in self._left_out:
            head["stream_options"] = {"include_usage": True}
        if request.tools:
            head["tools"] = [{"type": "function", "function": spec.to_dict()}
                             for spec in request.tools]
            if request.forced_tool:
                head["tool_choice"] = {"type": "function",
                                       "function": {"name": request.forced_tool}}
            elif request.tool_choice != "auto":
                head["tool_choice"] = request.tool_choice
            if not request.parallel_tool_calls and "parallel_tool_calls" not in self._left_out:
                head["parallel_tool_calls"] = False  # the default is True; some servers lack it
        max_tokens = request.max_tokens or self._max_tokens_override
        if max_tokens:
            head[self._max_tokens_field] = max_tokens
        settings = request.settings
        temperature = _first(settings.temperature, self.temperature)
        if temperature is not None:
            head["temperature"] = temperature
        effort = _first(settings.reasoning_effort, self.reasoning_effort)
        if effort is not None:
            head["reasoning_effort"] = effort
        if settings.response_format is not None:
            head["response_format"] = settings.response_format
        if self.extra_body:
            head.update(self.extra_body)
        messages = request.messages
        # The system prompt is first and changes often (it holds the memory blocks): it is
        # encoded on each call, the rest is kept.
        start = 1 if messages and messages[0].role == "system" else 0
        kept = self._kept.inside(messages, start)
        first = (dumps(wire_message(messages[0], self._system_role, self._wire_id)) if start
                 else b"")
        comma = b"," if first and kept else b""
        return b"".join((dumps(head)[:-1], b',"messages":[', first, comma, kept, b"]}"))

    async def _read(self, response: httpx2.Response) -> AsyncIterator[StreamItem]:
        out = StreamAssembler(self.name)
        slots = _CallSlots()
        usage = None
        finish_reason: str | None = None
        answered = False
        async for _event, data in server_sent_events(response):
            chunk = loads(data)
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                raise stream_error(chunk["error"], self.provider,
                                   "An error occurred during streaming")
            if chunk.get("usage"):
                usage = usage_from_openai(chunk["usage"])
            for choice in chunk.get("choices") or ():
                answered = True
                delta = choice.get("delta")
                if delta:
                    for item in _delta_items(out, slots, delta):
                        yield item
                if choice.get("finish_reason"):
                    finish_reason = choice["finish_reason"]
        if not answered:
            raise InvalidResponse(f"the stream from {self.base_url} ended without a response",
                                  provider=self.provider)
        result = out.finish(usage, finish_reason)
        result.finish_reason = _normal_finish(finish_reason, bool(result.message.tool_calls))
        yield result


def _first(asked: Any, own: Any) -> Any:
    """The request's setting, else the model's own."""
    return asked if asked is not None else own


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


def _delta_items(out: StreamAssembler, slots: _CallSlots, delta: dict[str, Any]
                 ) -> list[StreamItem]:
    items: list[StreamItem] = []
    # DeepSeek and older vLLM say reasoning_content; OpenRouter, Ollama, newer vLLM say
    # reasoning. Some send both with the same text, so take one.
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        items.append(out.reasoning(reasoning))
    content = delta.get("content")
    if content and isinstance(content, str):
        items.append(out.text(content))
    for call in delta.get("tool_calls") or ():
        function = call.get("function") or {}
        name = function.get("name") or None
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):  # a few servers send the parsed object
            arguments = json.dumps(arguments)
        id = call.get("id") or None
        items += out.tool_call(slots.slot(call.get("index"), id), id, name, arguments)
    return items


def _normal_finish(reason: str | None, has_calls: bool) -> str:
    """OpenAI's vocabulary; servers that say "stop" (or nothing) after tool calls are fixed."""
    if has_calls and reason in (None, "stop", "eos", "function_call", "tool_calls"):
        return "tool_calls"
    return reason or "stop"


def usage_from_openai(raw: dict[str, Any]) -> Usage:
    """``Usage`` from an OpenAI usage object; cached and reasoning tokens are subsets."""
    prompt = raw.get("prompt_tokens_details") or {}
    completion = raw.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("prompt_tokens") or 0,
        output_tokens=raw.get("completion_tokens") or 0,
        cached_input_tokens=prompt.get("cached_tokens") or 0,
        reasoning_tokens=completion.get("reasoning_tokens") or 0,
    )


def wire_id(id: str) -> str:
    """A tool-call id OpenAI accepts, the same for a call and its result."""
    if id and len(id) <= _MAX_ID_LENGTH:
        return id
    return "call_" + hashlib.sha256(id.encode()).hexdigest()[:_MAX_ID_LENGTH - 5]


def mistral_id(id: str) -> str:
    """A tool-call id Mistral accepts (nine letters and digits), the same for a call and its
    result: its own ids as they are, any other as nine characters of its digest."""
    if _MISTRAL_ID.fullmatch(id):
        return id
    number = int.from_bytes(hashlib.sha256(id.encode()).digest()[:8], "big")
    return "".join(_ALNUM[(number // len(_ALNUM) ** i) % len(_ALNUM)] for i in range(9))


def to_wire_messages(messages: list[Message], system_role: str = "system") -> list[dict[str, Any]]:
    """Transcript messages as Chat Completions messages."""
    return [wire_message(message, system_role) for message in messages]


def wire_message(message: Message, system_role: str = "system",
                 ids: Callable[[str], str] = wire_id) -> dict[str, Any]:
    """One transcript message as a Chat Completions message.

    Reasoning is not sent back: Chat Completions has no field for it, and servers that emit
    ``reasoning_content`` reject it on input.
    """
    if message.role == "system":
        return {"role": system_role, "content": message.text}
    if message.role == "user":
        return {"role": "user", "content": _user_content(message)}
    if message.role == "assistant":
        entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            entry["tool_calls"] = [
                {"id": ids(call.id), "type": "function",
                 "function": {"name": call.name,
                              "arguments": call.raw_arguments
                              if call.raw_arguments is not None
                              else json.dumps(call.arguments)}}
                for call in message.tool_calls]
        elif entry["content"] is None:
            entry["content"] = ""
        return entry
    return {"role": "tool", "tool_call_id": ids(message.tool_call_id or ""),
            "content": message.text}


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

