"""The Gemini wire format for the fake server: script items as ``generateContent`` responses
and SSE chunks, the checks Google's API makes of a request, and a request read back as a
``ModelRequest`` for script functions."""

from __future__ import annotations

import json
from typing import Any

from ..llm.base import ModelRequest, ModelSettings, ToolSpec
from ..messages import Message, Part, ReasoningPart, TextPart, ToolCall, Usage
from ._wire import Completion, chunks, completion_parts, raw_arguments, signature
from .scripted import Call

# What Gemini 3 takes in place of a signature on calls another model wrote (Google's docs).
DUMMY_SIGNATURES = {"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"}
# The fields of Gemini's ``Schema``; any other name in a tool's parameters is refused.
SCHEMA_FIELDS = {"type", "format", "title", "description", "nullable", "enum", "maxItems",
                 "minItems", "properties", "required", "minProperties", "maxProperties",
                 "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering",
                 "default", "items", "minimum", "maximum"}
_FINISH = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS",
           "content_filter": "SAFETY"}
GRPC_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
               404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
               503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def call_signature(name: str, arguments: dict[str, Any]) -> str:
    """The fake's signature of a function call: a digest, so a tampered call is detected."""
    return signature(name + json.dumps(arguments, sort_keys=True))


def error_body(status: int, message: str, *, reason: str | None = None,
               retry_after: float | None = None) -> dict[str, Any]:
    """A Google API error: gRPC status name, ``ErrorInfo`` reason, ``RetryInfo`` delay."""
    details: list[dict[str, Any]] = []
    if reason:
        details.append({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                        "domain": "googleapis.com"})
    if retry_after is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": f"{retry_after:g}s"})
    error: dict[str, Any] = {"code": status, "message": message,
                             "status": GRPC_STATUS.get(status, "UNKNOWN")}
    if details:
        error["details"] = details
    return {"error": error}


def gemini_usage(usage: Usage) -> dict[str, Any]:
    data = {"promptTokenCount": usage.input_tokens,
            "candidatesTokenCount": max(0, usage.output_tokens - usage.reasoning_tokens),
            "totalTokenCount": usage.input_tokens + usage.output_tokens}
    if usage.reasoning_tokens:
        data["thoughtsTokenCount"] = usage.reasoning_tokens
    if usage.cached_input_tokens:
        data["cachedContentTokenCount"] = usage.cached_input_tokens
    return data


def _finish(item: Completion) -> str:
    reason = item.finish_reason
    if reason and reason.isupper():  # Gemini's own word, such as MALFORMED_FUNCTION_CALL
        return reason
    return _FINISH.get(reason or "stop", "OTHER")


def _call_parts(calls: list[Call]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for c in calls:
        try:
            arguments = json.loads(raw_arguments(c))
        except ValueError:  # Gemini sends parsed arguments only
            arguments = {"_raw": c.raw_arguments}
        part: dict[str, Any] = {"functionCall": {"name": c.name, "args": arguments}}
        if not parts:
            part["thoughtSignature"] = call_signature(c.name, arguments)
        parts.append(part)
    return parts


def gemini_events(item: Completion, model: str, usage: Usage, *,
                  chunk_size: int) -> list[dict[str, Any]]:
    """The ``GenerateContentResponse`` chunks streaming ``item``: thought summaries and text
    in pieces, function calls whole in one chunk, usage with the last."""
    reasoning, text, calls = completion_parts(item)
    pieces: list[list[dict[str, Any]]] = [[{"text": p, "thought": True}]
                                          for p in chunks(reasoning, chunk_size)]
    texts = [[{"text": p}] for p in chunks(text, chunk_size)]
    if texts and reasoning and not calls:  # a thinking model signs its last part
        texts[-1][0]["thoughtSignature"] = signature(text)
    pieces += texts
    if calls:
        pieces.append(_call_parts(calls))
    if not pieces:
        pieces.append([{"text": ""}])
    events: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
         "modelVersion": model} for parts in pieces]
    events[-1]["candidates"][0]["finishReason"] = _finish(item)
    events[-1]["usageMetadata"] = gemini_usage(usage)
    return events


def gemini_response(item: Completion, model: str, usage: Usage) -> dict[str, Any]:
    """A whole ``GenerateContentResponse`` for a ``generateContent`` request."""
    parts = [p for event in gemini_events(item, model, usage, chunk_size=1 << 30)
             for p in event["candidates"][0]["content"]["parts"]]
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0,
                            "finishReason": _finish(item)}],
            "usageMetadata": gemini_usage(usage), "modelVersion": model}


def _schema_problem(schema: Any, where: str) -> str | None:
    if not isinstance(schema, dict):
        return None
    for key in schema:
        if key not in SCHEMA_FIELDS:
            return (f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': "
                    f"Cannot find field.")
    if "type" in schema and not isinstance(schema["type"], str):
        return f"Invalid JSON payload received. Invalid value at '{where}.type'"
    properties = schema.get("properties")
    if schema.get("type", "").upper() == "OBJECT" and properties == {}:
        return f"* GenerateContentRequest.{where}.properties: should be non-empty for OBJECT type"
    for name, value in (properties or {}).items():
        problem = _schema_problem(value, f"{where}.properties[{name}].value")
        if problem:
            return problem
    for child in ("items",):
        problem = _schema_problem(schema.get(child), f"{where}.{child}")
        if problem:
            return problem
    for number, branch in enumerate(schema.get("anyOf") or []):
        problem = _schema_problem(branch, f"{where}.any_of[{number}]")
        if problem:
            return problem
    return None


def gemini_request_error(body: dict[str, Any], model: str) -> str | None:
    """What Google's API would refuse in ``body``: tool schemas, empty turns, turns that do
    not alternate, function responses that do not answer the calls before them, and
    signatures that do not match (missing ones on Gemini 3's calls)."""
    for i, tool in enumerate(body.get("tools") or []):
        for j, declaration in enumerate(tool.get("functionDeclarations") or []):
            problem = _schema_problem(declaration.get("parameters"),
                                      f"tools[{i}].function_declarations[{j}].parameters")
            if problem:
                return problem
    contents = body.get("contents")
    if not contents:
        return "* GenerateContentRequest.contents: contents is not specified"
    previous: dict[str, Any] | None = None
    for i, content in enumerate(contents):
        role, parts = content.get("role"), content.get("parts") or []
        if role not in ("user", "model"):
            return f"Please use a valid role: user, model. (contents[{i}])"
        if not parts:
            return (f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be "
                    f"empty.")
        if previous is not None and previous["role"] == role:
            return "Please ensure that multiturn requests alternate between user and model."
        asked = [p["functionCall"]["name"] for p in (previous or {}).get("parts", [])
                 if "functionCall" in p]
        answered = [p["functionResponse"].get("name") for p in parts if "functionResponse" in p]
        if answered and not asked:
            return ("Please ensure that function response turn comes immediately after a "
                    "function call turn.")
        if asked and len(answered) != len(asked):
            return ("Please ensure that the number of function response parts is equal to the "
                    "number of function call parts of the function call turn.")
        if sorted(answered) != sorted(asked):
            return (f"Please ensure that the function response names {answered} match the "
                    f"function call names {asked} of the function call turn.")
        calls = [p for p in parts if "functionCall" in p]
        if calls and (previous is None or previous["role"] != "user"):
            return ("Please ensure that function call turn comes immediately after a user "
                    "turn or after a function response turn.")
        for number, part in enumerate(parts):
            problem = _signature_problem(part, i, number, model, part is (calls or [None])[0])
            if problem:
                return problem
        previous = content
    return None


def _signature_problem(part: dict[str, Any], turn: int, number: int, model: str,
                       first_call: bool) -> str | None:
    given = part.get("thoughtSignature")
    call = part.get("functionCall")
    if given is None:
        if call is not None and first_call and model.startswith("gemini-3"):
            return (f"Function call is missing a thought_signature in functionCall parts. This "
                    f"is required for tools to work correctly, and missing thought_signature "
                    f"may lead to degraded model performance. Additional data, function call "
                    f"`default_api:{call.get('name')}` , position {number + 1}. Please refer to "
                    f"https://ai.google.dev/gemini-api/docs/thought-signatures for more details.")
        return None
    expected = (call_signature(call.get("name", ""), call.get("args") or {}) if call is not None
                else signature(part.get("text", "")))
    if given != expected and given not in DUMMY_SIGNATURES:
        return f"Corrupted thought signature. (contents[{turn}].parts[{number}])"
    return None


def gemini_request(body: dict[str, Any]) -> ModelRequest:
    """The ``ModelRequest`` a ``generateContent`` body stands for (function calls get ids
    by position, and their responses the ids of the calls they answer)."""
    messages: list[Message] = []
    system = body.get("systemInstruction")
    if system:
        messages.append(Message("system", [TextPart(p.get("text", ""))
                                           for p in system.get("parts") or []]))
    pending: list[ToolCall] = []
    for i, content in enumerate(body.get("contents") or []):
        parts: list[Part] = []
        calls: list[ToolCall] = []
        for j, part in enumerate(content.get("parts") or []):
            if "functionCall" in part:
                function = part["functionCall"]
                calls.append(ToolCall(f"call_{i}_{j}", function["name"],
                                      dict(function.get("args") or {})))
            elif "functionResponse" in part:
                response = part["functionResponse"]
                answered = next((c for c in pending if c.name == response.get("name")), None)
                if answered is not None:
                    pending.remove(answered)
                result = response.get("response") or {}
                text = result.get("output", result.get("error", ""))
                messages.append(Message("tool", [TextPart(str(text))],
                                        tool_call_id=answered.id if answered else None,
                                        name=response.get("name"), is_error="error" in result))
            elif part.get("thought"):
                parts.append(ReasoningPart(part.get("text", "")))
            elif "text" in part:
                parts.append(TextPart(part["text"]))
        pending = list(calls) or pending
        if parts or calls:
            messages.append(Message("assistant" if content.get("role") == "model" else "user",
                                    parts, calls))
    tools = [ToolSpec(d["name"], d.get("description", ""), d.get("parameters") or {})
             for tool in body.get("tools") or [] for d in tool.get("functionDeclarations") or []]
    calling = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
    allowed = calling.get("allowedFunctionNames") or []
    mode = {"ANY": "required", "NONE": "none"}.get(calling.get("mode", ""), "auto")
    config = body.get("generationConfig") or {}
    thinking = config.get("thinkingConfig") or {}
    settings = ModelSettings(config.get("temperature"),
                             thinking_budget=thinking.get("thinkingBudget"))
    return ModelRequest(messages, tools, mode,  # type: ignore[arg-type]
                        allowed[0] if len(allowed) == 1 else None, True,
                        config.get("maxOutputTokens"), settings)
