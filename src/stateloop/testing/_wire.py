"""Wire formats for the fake server: script items as OpenAI / Anthropic bodies and SSE streams,
Anthropic's model listing and Mistral's tool-call ids, and wire requests back as
``ModelRequest`` for script functions."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import string
import struct
import time
from typing import Any

from ..llm.assembler import parse_tool_call
from ..llm.base import ModelRequest, ModelSettings, ToolSpec
from ..messages import ImagePart, Message, Part, ReasoningPart, TextPart, ToolCall, Usage
from .scripted import Call, Calls, Reply

Completion = Reply | Calls
ANTHROPIC_MODELS = ("claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001",
                    "claude-opus-4-1-20250805")
ALNUM = string.ascii_letters + string.digits
MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")


def signature(thinking: str) -> str:
    """The fake's thinking-block signature: a digest, so a tampered block is detected."""
    return "sig-" + hashlib.sha256(thinking.encode()).hexdigest()[:32]


def tool_call_id(prefix: str) -> str:
    return prefix + os.urandom(12).hex()


def as_calls(item: Reply | Call | Calls) -> Completion:
    if isinstance(item, Call):
        return Calls([item])
    return item


def completion_parts(item: Completion) -> tuple[str, str, list[Call]]:
    """``(reasoning, text, calls)`` of a script item."""
    if type(item) is Reply:
        return item.reasoning, item.text, []
    assert type(item) is Calls
    return "", item.text, item.calls


def raw_arguments(call: Call) -> str:
    return call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)


def chunks(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def output_tokens(item: Completion) -> int:
    reasoning, text, calls = completion_parts(item)
    size = len(reasoning) + len(text) + sum(len(raw_arguments(c)) + len(c.name) for c in calls)
    return size // 4 + 1


# --- OpenAI Chat Completions ------------------------------------------------------------------

def openai_usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def openai_finish(item: Completion, calls: list[Call]) -> str:
    return item.finish_reason or ("tool_calls" if calls else "stop")


def openai_events(item: Completion, model: str, usage: Usage, *, chunk_size: int,
                  include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects streaming ``item``, as OpenAI sends them."""
    reasoning, text, calls = completion_parts(item)
    base = {"id": "chatcmpl-" + os.urandom(8).hex(), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": piece}) for piece in chunks(reasoning, chunk_size)]
    events += [chunk({"content": piece}) for piece in chunks(text, chunk_size)]
    for index, c in enumerate(calls):
        head = {"index": index, "id": c.id or tool_call_id("call_"), "type": "function",
                "function": {"name": c.name, "arguments": ""}}
        events.append(chunk({"tool_calls": [head]}))
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                   for piece in chunks(raw_arguments(c), chunk_size)]
    events.append(chunk({}, openai_finish(item, calls)))
    if include_usage:
        events.append({**base, "choices": [], "usage": openai_usage(usage)})
    return events


def openai_completion(item: Completion, model: str, usage: Usage) -> dict[str, Any]:
    """A whole ``chat.completion`` object for a non-streaming request."""
    reasoning, text, calls = completion_parts(item)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [
            {"id": c.id or tool_call_id("call_"), "type": "function",
             "function": {"name": c.name, "arguments": raw_arguments(c)}} for c in calls]
    return {"id": "chatcmpl-" + os.urandom(8).hex(), "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": openai_finish(item, calls)}],
            "usage": openai_usage(usage)}


def openai_transcript_error(messages: list[dict[str, Any]]) -> str | None:
    """OpenAI's complaint about unpaired tool calls and results, or None."""
    pending: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return (f"Invalid parameter: messages with role 'tool' must be a response to a "
                        f"preceeding message with 'tool_calls'. (messages[{index}])")
            pending.remove(message["tool_call_id"])
            continue
        if pending:
            break
        if role == "assistant":
            for number, call in enumerate(message.get("tool_calls") or []):
                if len(call.get("id", "")) > 40:
                    return (f"Invalid 'messages[{index}].tool_calls[{number}].id': string too "
                            f"long. Expected a string with maximum length 40, but got a string "
                            f"with length {len(call['id'])} instead.")
                pending.append(call.get("id"))
    if pending:
        return ("An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}")
    return None


def openai_request(body: dict[str, Any]) -> ModelRequest:
    """The ``ModelRequest`` a Chat Completions body stands for."""
    messages: list[Message] = []
    for wire in body.get("messages", []):
        role = "system" if wire.get("role") == "developer" else wire.get("role")
        content = _openai_parts(wire.get("content"))
        if role == "assistant":
            calls = [parse_tool_call(c["id"], c["function"]["name"], c["function"]["arguments"])
                     for c in wire.get("tool_calls") or []]
            messages.append(Message("assistant", content, calls))
        elif role == "tool":
            messages.append(Message("tool", content, tool_call_id=wire.get("tool_call_id")))
        else:
            messages.append(Message("system" if role == "system" else "user", content))
    tools = [ToolSpec(t["function"]["name"], t["function"].get("description", ""),
                      t["function"].get("parameters", {})) for t in body.get("tools") or []]
    choice = body.get("tool_choice", "auto")
    forced = choice["function"]["name"] if isinstance(choice, dict) else None
    settings = ModelSettings(body.get("temperature"), body.get("reasoning_effort"),
                             response_format=body.get("response_format"))
    return ModelRequest(messages, tools, "required" if forced else choice, forced,
                        body.get("parallel_tool_calls", True),
                        body.get("max_completion_tokens") or body.get("max_tokens"), settings)


def _openai_parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    parts: list[Part] = []
    for part in content:
        if part.get("type") == "text":
            parts.append(TextPart(part["text"]))
        elif part.get("type") == "image_url":
            parts.append(ImagePart(part["image_url"]["url"]))
    return parts


# --- Anthropic Messages -----------------------------------------------------------------------

def anthropic_usage(usage: Usage) -> dict[str, Any]:
    uncached = usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens
    return {"input_tokens": max(0, uncached), "output_tokens": usage.output_tokens,
            "cache_read_input_tokens": usage.cached_input_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens}


_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _anthropic_stop(item: Completion, calls: list[Call]) -> str:
    if item.finish_reason:
        return _STOP_REASONS.get(item.finish_reason, item.finish_reason)
    return "tool_use" if calls else "end_turn"


def _anthropic_blocks(item: Completion) -> list[dict[str, Any]]:
    reasoning, text, calls = completion_parts(item)
    blocks: list[dict[str, Any]] = []
    if reasoning:
        blocks.append({"type": "thinking", "thinking": reasoning,
                       "signature": signature(reasoning)})
    if text:
        blocks.append({"type": "text", "text": text})
    for c in calls:
        blocks.append({"type": "tool_use", "id": c.id or tool_call_id("toolu_"), "name": c.name,
                       "input": c.arguments, "_raw": raw_arguments(c)})
    return blocks


def anthropic_message(item: Completion, model: str, usage: Usage) -> dict[str, Any]:
    """A whole Messages API response for a non-streaming request."""
    _, _, calls = completion_parts(item)
    blocks = [{k: v for k, v in b.items() if k != "_raw"} for b in _anthropic_blocks(item)]
    return {"id": "msg_" + os.urandom(12).hex(), "type": "message", "role": "assistant",
            "model": model, "content": blocks, "stop_reason": _anthropic_stop(item, calls),
            "stop_sequence": None, "usage": anthropic_usage(usage)}


def anthropic_events(item: Completion, model: str, usage: Usage, *,
                     chunk_size: int) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event, data)`` pairs of a Messages API stream for ``item``."""
    _, _, calls = completion_parts(item)
    start_usage = {**anthropic_usage(usage), "output_tokens": 1}
    start: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {
        "type": "message_start",
        "message": {"id": "msg_" + os.urandom(12).hex(), "type": "message", "role": "assistant",
                    "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
                    "usage": start_usage}})]
    for index, block in enumerate(_anthropic_blocks(item)):
        kind = block["type"]
        if kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": piece}
                      for piece in chunks(block["thinking"], chunk_size)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece}
                      for piece in chunks(block["text"], chunk_size)]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": piece}
                      for piece in chunks(block["_raw"], chunk_size)]
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": start}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                            "delta": delta}) for delta in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": _anthropic_stop(item, calls), "stop_sequence": None},
        "usage": {"output_tokens": usage.output_tokens}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def anthropic_request_error(body: dict[str, Any]) -> str | None:
    """What the Messages API would reject in ``body`` (pairing, signatures, ids), or None."""
    if "max_tokens" not in body:
        return "max_tokens: Field required"
    pending: list[str] = []
    for i, message in enumerate(body.get("messages", [])):
        blocks = _blocks(message.get("content"))
        answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        for j, block in enumerate(blocks):
            kind = block.get("type")
            if kind == "text" and not block.get("text"):
                return f"messages.{i}.content.{j}: text content blocks must be non-empty"
            if kind == "tool_result" and block.get("tool_use_id") not in pending:
                return (f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        f"block must have a corresponding `tool_use` block in the previous "
                        f"message.")
            if kind == "tool_use" and not _TOOL_ID.match(str(block.get("id", ""))):
                return (f"messages.{i}.content.{j}.tool_use.id: String should match pattern "
                        f"'^[a-zA-Z0-9_-]+$'")
            if kind == "thinking" and block.get("signature") != signature(block.get("thinking",
                                                                                    "")):
                return f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
        missing = [p for p in pending if p not in answered]
        if missing:
            return (f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    f"corresponding `tool_result` block in the next message.")
        pending = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if pending:
        return (f"`tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(pending)}. Each `tool_use` block must have a corresponding "
                f"`tool_result` block in the next message.")
    return None


def anthropic_request(body: dict[str, Any]) -> ModelRequest:
    """The ``ModelRequest`` a Messages API body stands for."""
    messages: list[Message] = []
    system = body.get("system")
    if system:
        messages.append(Message("system", [TextPart(b["text"]) for b in _blocks(system)]))
    for wire in body.get("messages", []):
        content: list[Part] = []
        calls: list[ToolCall] = []
        for block in _blocks(wire.get("content")):
            kind = block.get("type")
            if kind == "text":
                content.append(TextPart(block["text"]))
            elif kind == "thinking":
                content.append(ReasoningPart(block["thinking"], block.get("signature")))
            elif kind == "tool_use":
                calls.append(ToolCall(block["id"], block["name"], dict(block.get("input") or {})))
            elif kind == "tool_result":
                text = "".join(b.get("text", "") for b in _blocks(block.get("content", "")))
                messages.append(Message("tool", [TextPart(text)],
                                        tool_call_id=block["tool_use_id"],
                                        is_error=bool(block.get("is_error"))))
        if content or calls:
            messages.append(Message(wire["role"], content, calls))
    tools = [ToolSpec(t["name"], t.get("description", ""), t.get("input_schema", {}))
             for t in body.get("tools") or []]
    choice = body.get("tool_choice") or {"type": "auto"}
    forced = choice.get("name") if choice.get("type") == "tool" else None
    mode = {"any": "required", "tool": "required", "none": "none"}.get(choice["type"], "auto")
    thinking = body.get("thinking") or {}
    settings = ModelSettings(body.get("temperature"), thinking_budget=thinking.get("budget_tokens"))
    return ModelRequest(messages, tools, mode, forced,  # type: ignore[arg-type]
                        not choice.get("disable_parallel_tool_use", False),
                        body.get("max_tokens"), settings)


# --- Embeddings -------------------------------------------------------------------------------

EMBEDDING_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072,
                  "text-embedding-ada-002": 1536}  # OpenAI's sizes, as its service answers

def embed(text: str, dimensions: int) -> list[float]:
    """A deterministic unit vector from hashed words: texts sharing words point alike."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dimensions
        vector[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def encode_embedding(vector: list[float], encoding_format: str | None) -> list[float] | str:
    if encoding_format == "base64":  # what the openai SDK asks for by default
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
    return vector


def anthropic_models_page(query: dict[str, str]) -> dict[str, Any]:
    """A page of Anthropic's ``GET /v1/models``: ``limit`` models after ``after_id``."""
    names = list(ANTHROPIC_MODELS)
    after = query.get("after_id")
    start = names.index(after) + 1 if after in names else 0
    page = names[start:start + max(1, int(query.get("limit") or 20))]
    return {"data": [{"type": "model", "id": name, "display_name": name,
                      "created_at": "2025-01-01T00:00:00Z"} for name in page],
            "has_more": start + len(page) < len(names),
            "first_id": page[0] if page else None, "last_id": page[-1] if page else None}


def mistral_id() -> str:
    return "".join(ALNUM[byte % len(ALNUM)] for byte in os.urandom(9))


def mistral_id_error(messages: list[dict[str, Any]]) -> str | None:
    """Mistral's complaint about a tool-call id that is not 9 letters and digits, or None."""
    for message in messages:
        ids = [call.get("id") for call in message.get("tool_calls") or ()]
        if message.get("role") == "tool":
            ids.append(message.get("tool_call_id"))
        for found in ids:
            if not isinstance(found, str) or not MISTRAL_ID.fullmatch(found):
                return (f"Tool call id was {found} but must be a-z, A-Z, 0-9, with a length "
                        "of 9.")
    return None
