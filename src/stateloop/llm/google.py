"""Google's Gemini API (``generateContent``), spoken over HTTP directly (no SDK needed).

Here live Gemini's rules: the system prompt is ``systemInstruction``; turns alternate
``user`` and ``model``, so messages of one side in a row make one turn; tool results are
``functionResponse`` parts of a user turn, naming their function; function calls come whole,
several in one turn, usually without ids (each is given one here); a model's
``thoughtSignature`` goes back on the first function call of the turn it came with, only to
the model that wrote it; tool parameters are converted to the schema subset Gemini takes
(``gemini_schema``); reasoning is asked for with ``thinkingConfig``.
"""

from __future__ import annotations

import json
import mimetypes
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from ..errors import AuthenticationError, ConfigError, InvalidRequest, InvalidResponse
from ..messages import ImagePart, Message, ReasoningPart, TextPart, Usage
from ._http import loads, model_stream, post_stream, server_sent_events, stream_error
from .assembler import StreamAssembler
from .base import ModelRequest, StreamItem, ToolSpec
from .gemini_schema import SchemaTooLarge, gemini_schema, parameters
from .models import model_limits
from .pieces import Encoded, KeptTurns, dumps

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
           "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
           "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
           "IMAGE_SAFETY": "content_filter", "LANGUAGE": "content_filter"}
# The model wrote a call it could not finish: asked again, it usually succeeds.
_RETRIED_FINISH = {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"}
# Tokens of thinking per reasoning effort, as Google's OpenAI-compatible endpoint maps them.
_EFFORT_BUDGETS = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576,
                   "xhigh": 24576}
_THINKING_MODELS = ("gemini-2.5", "gemini-3")  # think unless told not to
# Gemini 3 thinks at a level instead; it cannot stop, and has nothing above high.
_LEVELS = {"none": "low", "minimal": "low", "xhigh": "high"}
_ALWAYS_THINKS = ("gemini-2.5-pro", "gemini-3")  # refuse a budget of 0
_LEAST_BUDGET = 128
_SIGNED_CALLS = "google_ai/gemini-3"
_FOREIGN_SIGNATURE = "skip_thought_signature_validator"
# A model id goes into the URL's path: nothing that could leave ``/v1beta/models/``.
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_DATA_URL = re.compile(r"^data:(?P<type>[\w/+.-]+);base64,(?P<data>.*)$", re.DOTALL)


class GeminiModel:
    """A Gemini model: ``GeminiModel("gemini-2.5-flash")``, the handle ``google_ai/NAME``.

    ``api_key`` and ``base_url`` default to ``GEMINI_API_KEY`` and ``GEMINI_BASE_URL``.
    ``thinking_budget`` sets thinking tokens (0 turns thinking off; models that cannot stop
    thinking, 2.5 Pro and Gemini 3, get the least budget, 128);
    ``reasoning_effort`` (``none`` to ``high``) is the same as a budget, or Gemini 3's
    ``thinkingLevel``. Thought summaries come back as reasoning when the model thinks.
    """

    provider = "google_ai"

    def __init__(self, name: str, *, base_url: str | None = None, api_key: str | None = None,
                 context_window: int | None = None, max_output_tokens: int | None = None,
                 timeout: float = 120.0, temperature: float | None = None,
                 thinking_budget: int | None = None, reasoning_effort: str | None = None,
                 ) -> None:
        self.model_id = name.removeprefix("models/")
        if not _MODEL_ID.fullmatch(self.model_id):
            raise ConfigError(f"{name!r} is not a Gemini model name (letters, digits, '.', "
                              f"'_' and '-', such as gemini-2.5-flash)")
        self.name = f"{self.provider}/{self.model_id}"
        base = base_url or os.environ.get("GEMINI_BASE_URL") or GEMINI_BASE_URL
        self.base_url = base.rstrip("/").removesuffix("/v1beta")
        limits = model_limits(self.model_id, context_window=context_window,
                              max_output_tokens=max_output_tokens)
        self.context_window = limits.context_window
        self.max_output_tokens: int | None = limits.max_output_tokens
        self.timeout = timeout
        self.temperature = temperature
        self.thinking_budget = thinking_budget
        self.reasoning_effort = reasoning_effort
        self._api_key = api_key
        self._turns = KeptTurns(lambda m: _encoded(m, self.name), b"parts")

    def __repr__(self) -> str:
        return f"GeminiModel({self.model_id!r}, base_url={self.base_url!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        key = self._api_key or os.environ.get("GEMINI_API_KEY")
        if key:
            headers["x-goog-api-key"] = key
        elif self.base_url == GEMINI_BASE_URL:
            raise AuthenticationError(
                "no Gemini API key: set GEMINI_API_KEY (or GEMINI_BASE_URL for a compatible "
                "server) where the model is called; or give the agent another model (--model; "
                "demo/echo needs no provider)", provider=self.provider)
        return headers

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one response: deltas as they arrive, then the ``ModelResponse``."""
        url = f"{self.base_url}/v1beta/models/{self.model_id}:streamGenerateContent?alt=sse"
        return model_stream(
            lambda: post_stream(url, self.body(request), self._headers(), self.timeout,
                                provider=self.provider),
            self._read, self.base_url, self.provider)

    def body(self, request: ModelRequest) -> bytes:
        """The ``generateContent`` request body: its small fields serialized anew, the
        turns from parts kept between calls."""
        messages = request.messages
        start = 0
        while start < len(messages) and messages[start].role == "system":
            start += 1
        head: dict[str, Any] = {}
        system = "\n\n".join(m.text for m in messages[:start] if m.text)
        if system:
            head["systemInstruction"] = {"parts": [{"text": system}]}
        if request.tools:
            head["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
            if request.forced_tool:
                head["toolConfig"] = {"functionCallingConfig": {
                    "mode": "ANY", "allowedFunctionNames": [request.forced_tool]}}
            elif request.tool_choice != "auto":
                mode = "ANY" if request.tool_choice == "required" else "NONE"
                head["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
        head["generationConfig"] = self._generation_config(request)
        turns = self._turns.turns(messages, start)
        return b"".join((dumps(head)[:-1], b',"contents":[', turns, b"]}"))

    def _generation_config(self, request: ModelRequest) -> dict[str, Any]:
        settings = request.settings
        config: dict[str, Any] = {
            "maxOutputTokens": request.max_tokens or self.max_output_tokens}
        temperature = _first(settings.temperature, self.temperature)
        if temperature is not None:
            config["temperature"] = temperature
        budget = _first(settings.thinking_budget, self.thinking_budget)
        effort = _first(settings.reasoning_effort, self.reasoning_effort)
        thinking: dict[str, Any] = {}
        if budget is not None:
            thinking["thinkingBudget"] = budget
        elif effort is not None and self.model_id.startswith("gemini-3"):
            thinking["thinkingLevel"] = _LEVELS.get(effort, effort)
        elif effort is not None:
            if effort not in _EFFORT_BUDGETS:
                raise InvalidRequest(f"reasoning_effort must be one of "
                                     f"{', '.join(_EFFORT_BUDGETS)}, not {effort!r}",
                                     provider=self.provider)
            thinking["thinkingBudget"] = _EFFORT_BUDGETS[effort]
        if thinking.get("thinkingBudget") == 0 and self.model_id.startswith(_ALWAYS_THINKS):
            thinking["thinkingBudget"] = _LEAST_BUDGET  # it refuses 0: think the least
        thinks = thinking.get("thinkingBudget", 1) != 0 and (
            bool(thinking) or self.model_id.startswith(_THINKING_MODELS))
        if thinks:
            thinking["includeThoughts"] = True
        if thinking:
            config["thinkingConfig"] = thinking
        response_format = settings.response_format or {}
        if response_format.get("type") in ("json_object", "json_schema"):
            config["responseMimeType"] = "application/json"
            schema = (response_format.get("json_schema") or {}).get("schema")
            if isinstance(schema, dict):
                try:
                    config["responseSchema"] = gemini_schema(schema)
                except SchemaTooLarge as exc:
                    raise InvalidRequest(f"response_format: {exc}",
                                         provider=self.provider) from exc
        return config

    async def _read(self, response: httpx2.Response) -> AsyncIterator[StreamItem]:
        out = StreamAssembler(self.name)
        usage = Usage()
        finish: str | None = None
        detail = ""
        blocked: str | None = None
        answered = False
        calls = 0
        call_signature: str | None = None  # the first function call's, else the last part's
        last_signature: str | None = None
        async for _event, data in server_sent_events(response):
            chunk = loads(data)
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                raise stream_error(chunk, self.provider, data)
            if chunk.get("usageMetadata"):
                usage = usage_from_gemini(chunk["usageMetadata"])
            blocked = (chunk.get("promptFeedback") or {}).get("blockReason") or blocked
            for candidate in (chunk.get("candidates") or ())[:1]:  # one asked for
                answered = True
                for part in (candidate.get("content") or {}).get("parts") or ():
                    signature = part.get("thoughtSignature")
                    if signature:
                        last_signature = signature
                    function = part.get("functionCall")
                    if function is not None:
                        if signature and call_signature is None:
                            call_signature = signature
                        arguments = json.dumps(function.get("args") or {})
                        for item in out.tool_call(calls, function.get("id") or None,
                                                  function.get("name") or "", arguments):
                            yield item
                        calls += 1
                    elif part.get("thought") and part.get("text"):
                        yield out.reasoning(part["text"])
                    elif part.get("text"):
                        yield out.text(part["text"])
                if candidate.get("finishReason"):
                    finish = candidate["finishReason"]
                    detail = candidate.get("finishMessage") or ""
        if not answered:
            if blocked:
                raise InvalidRequest(f"Gemini blocked the prompt ({blocked})",
                                     provider=self.provider)
            raise InvalidResponse(f"the stream from {self.base_url} ended without a candidate",
                                  provider=self.provider)
        if finish in _RETRIED_FINISH:
            raise InvalidResponse(f"Gemini ended with {finish}" + (f": {detail}" if detail
                                                                   else ""),
                                  provider=self.provider)
        signature = call_signature or last_signature
        if signature:
            out.reasoning_signature(signature)
        reason = _FINISH.get(finish or "STOP", (finish or "").lower())
        if calls and reason == "stop":
            reason = "tool_calls"
        yield out.finish(usage, reason)


def _first(asked: Any, own: Any) -> Any:
    """The request's setting, else the model's own."""
    return asked if asked is not None else own


def usage_from_gemini(raw: dict[str, Any]) -> Usage:
    """``Usage`` from ``usageMetadata``: thoughts count as output (and as reasoning), cached
    content and tool-use prompts as input."""
    thoughts = raw.get("thoughtsTokenCount") or 0
    return Usage(
        input_tokens=(raw.get("promptTokenCount") or 0) + (raw.get("toolUsePromptTokenCount")
                                                           or 0),
        output_tokens=(raw.get("candidatesTokenCount") or 0) + thoughts,
        cached_input_tokens=raw.get("cachedContentTokenCount") or 0,
        reasoning_tokens=thoughts,
    )


def _declaration(tool: ToolSpec) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
    try:
        converted = parameters(tool.parameters)
    except SchemaTooLarge as exc:
        raise InvalidRequest(f"tool {tool.name!r}'s parameters: {exc}",
                             provider=GeminiModel.provider) from exc
    if converted is not None:
        declaration["parameters"] = converted
    return declaration


def _encoded(message: Message, model: str) -> Encoded:
    """A message's side, its function responses' JSON and its other parts' JSON."""
    role, parts = message_parts(message, model)
    responses = [dumps(p) for p in parts if "functionResponse" in p]
    return role, responses, [dumps(p) for p in parts if "functionResponse" not in p]


def to_wire_contents(messages: list[Message], model: str) -> tuple[str, list[dict[str, Any]]]:
    """``(system instruction, contents)`` for a transcript; ``model`` decides which
    signatures are sent back."""
    start = 0
    while start < len(messages) and messages[start].role == "system":
        start += 1
    contents: list[dict[str, Any]] = []
    for message in messages[start:]:
        role, parts = message_parts(message, model)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    for content in contents:  # function responses open their turn
        content["parts"].sort(key=lambda part: "functionResponse" not in part)
    return "\n\n".join(m.text for m in messages[:start] if m.text), contents


def message_parts(message: Message, model: str) -> tuple[str, list[dict[str, Any]]]:
    """The side and parts of a message after the leading system prompt."""
    if message.role == "system":  # a system note mid-transcript becomes user text
        return "user", [{"text": message.text}] if message.text else []
    if message.role == "user":
        return "user", _user_parts(message)
    if message.role == "assistant":
        return "model", _model_parts(message, model)
    key = "error" if message.is_error else "output"
    return "user", [{"functionResponse": {"name": message.name or message.tool_call_id or "",
                                          "response": {key: message.text}}}]


def _model_parts(message: Message, model: str) -> list[dict[str, Any]]:
    signature = next((p.signature for p in message.content
                      if type(p) is ReasoningPart and p.model == model and p.signature), None)
    parts: list[dict[str, Any]] = [{"text": p.text} for p in message.content
                                   if type(p) is TextPart and p.text]
    calls: list[dict[str, Any]] = [{"functionCall": {"name": c.name, "args": c.arguments}}
                                   for c in message.tool_calls]
    if calls and (signature or model.startswith(_SIGNED_CALLS)):
        # Gemini 3 refuses calls without a signature; another model's calls take the value
        # Google documents for them.
        calls[0]["thoughtSignature"] = signature or _FOREIGN_SIGNATURE
    elif signature and parts:
        parts[-1]["thoughtSignature"] = signature
    return parts + calls


def _user_parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if type(part) is TextPart and part.text:
            parts.append({"text": part.text})
        elif type(part) is ImagePart:
            match = _DATA_URL.match(part.url)
            if match:
                parts.append({"inlineData": {"mimeType": part.media_type or match["type"],
                                             "data": match["data"]}})
            else:
                kind = part.media_type or mimetypes.guess_type(part.url)[0] or "image/jpeg"
                parts.append({"fileData": {"mimeType": kind, "fileUri": part.url}})
    return parts
