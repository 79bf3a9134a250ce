"""Messages as an Agent File holds them (Letta's stored ``Message``) and as stateloop does.

Letta's tool calls are OpenAI-shaped (``function.arguments`` a JSON string); a tool message
may answer several parallel calls at once (``tool_returns``), which becomes one stateloop
tool message per call. A step paused for a human is Letta's ``approval`` message carrying the
calls; the human's answer (an ``approval`` message with ``approvals``) has no message of its
own here: its effect is the tool results that follow it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..messages import ImagePart, Message, Part, ReasoningPart, TextPart, ToolCall, new_uuid_id
from .reading import AgentFileError

_ROLES = {"system": "system", "user": "user", "assistant": "assistant", "tool": "tool",
          "function": "tool", "approval": "assistant", "summary": "user"}


@dataclass(slots=True)
class Converted:
    """One file message as stateloop messages; ``approval_request`` marks calls that were
    waiting for a human when the file was written."""

    messages: list[Message] = field(default_factory=list)
    approval_request: bool = False


def timestamp(value: Any, where: str) -> float:
    if value is None:
        return datetime.now(UTC).timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        raise AgentFileError("must be an ISO 8601 date-time", field=where)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise AgentFileError(f"{value!r} is not an ISO 8601 date-time", field=where) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat()


def from_letta(data: dict[str, Any], where: str) -> Converted:
    """The stateloop messages for one file message (none for an approval answer)."""
    role = data.get("role")
    if role not in _ROLES:
        raise AgentFileError(f"unknown role {role!r}; expected one of {', '.join(_ROLES)}",
                             field=f"{where}.role")
    created = timestamp(data.get("created_at"), f"{where}.created_at")
    content = _parts(data.get("content"), f"{where}.content")
    calls = _calls(data.get("tool_calls"), f"{where}.tool_calls")
    if role == "approval" and not calls:
        return Converted()  # a human's answer: the tool results after it carry its effect
    if _ROLES[role] == "tool":
        return Converted(_tool_messages(data, content, created, where))
    message = Message(_ROLES[role], content, calls if _ROLES[role] == "assistant" else [],  # type: ignore[arg-type]
                      id=new_uuid_id("message"), created_at=created)
    return Converted([message], approval_request=role == "approval")


def _tool_messages(data: dict[str, Any], content: list[Part], created: float,
                   where: str) -> list[Message]:
    returns = data.get("tool_returns") or []
    if not isinstance(returns, list):
        raise AgentFileError("must be a list", field=f"{where}.tool_returns")
    for index, item in enumerate(returns):
        if not isinstance(item, dict):
            raise AgentFileError("must be an object", field=f"{where}.tool_returns.{index}")
    text = "".join(p.text for p in content if isinstance(p, TextPart))
    if len(returns) <= 1:
        first = returns[0] if returns else {}
        call_id = data.get("tool_call_id") or first.get("tool_call_id")
        if not isinstance(call_id, str):
            raise AgentFileError("a tool message names the call it answers",
                                 field=f"{where}.tool_call_id")
        return [Message("tool", [TextPart(text or _response(first.get("func_response")))],
                        tool_call_id=call_id, name=data.get("name"),
                        is_error=first.get("status") == "error",
                        id=new_uuid_id("message"), created_at=created)]
    answers = []  # several parallel calls answered by one message: one message per call
    for index, item in enumerate(returns):
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str):
            raise AgentFileError("names no call", field=f"{where}.tool_returns.{index}")
        answers.append(Message("tool", [TextPart(_response(item.get("func_response")))],
                               tool_call_id=call_id, is_error=item.get("status") == "error",
                               id=new_uuid_id("message"), created_at=created))
    return answers


def _response(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(str(p.get("text", "")) for p in value if isinstance(p, dict))
    return json.dumps(value)


def _parts(content: Any, where: str) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    if not isinstance(content, list):
        raise AgentFileError("must be a list of content parts or a string", field=where)
    parts: list[Part] = []
    for index, part in enumerate(content):
        here = f"{where}.{index}"
        if not isinstance(part, dict):
            raise AgentFileError("must be an object", field=here)
        kind = part.get("type")
        if kind == "text":
            parts.append(TextPart(_string(part.get("text"), f"{here}.text")))
        elif kind == "reasoning":
            parts.append(ReasoningPart(_string(part.get("reasoning"), f"{here}.reasoning"),
                                       part.get("signature")))
        elif kind == "redacted_reasoning":
            parts.append(ReasoningPart(_string(part.get("data"), f"{here}.data"),
                                       redacted=True))
        elif kind == "image":
            parts.append(_image(part.get("source"), f"{here}.source"))
        elif kind in ("omitted_reasoning", "tool_call", "tool_return"):
            continue  # nothing a model is shown again
        else:
            raise AgentFileError(f"unknown content type {kind!r}", field=f"{here}.type")
    return parts


def _image(source: Any, where: str) -> ImagePart:
    if isinstance(source, dict) and source.get("type") == "url":
        return ImagePart(_string(source.get("url"), f"{where}.url"))
    if isinstance(source, dict) and source.get("type") in ("base64", "letta") \
            and source.get("data"):
        media = source.get("media_type") or "image/png"
        return ImagePart(f"data:{media};base64,{source['data']}", media)
    raise AgentFileError("an image needs a url or base64 data", field=where)


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise AgentFileError(f"must be a string, not {type(value).__name__}", field=where)
    return value


def _calls(value: Any, where: str) -> list[ToolCall]:
    if not value:
        return []
    if not isinstance(value, list):
        raise AgentFileError("must be a list", field=where)
    calls = []
    for index, item in enumerate(value):
        here = f"{where}.{index}"
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(item.get("id"), str):
            raise AgentFileError("a tool call has an id and a function", field=here)
        name = _string(function.get("name"), f"{here}.function.name")
        raw = function.get("arguments") or "{}"
        raw = raw if isinstance(raw, str) else json.dumps(raw)
        try:
            arguments = json.loads(raw)
            problem = None if isinstance(arguments, dict) else "arguments are not an object"
        except json.JSONDecodeError as exc:
            arguments, problem = {}, f"arguments are not JSON: {exc}"
        calls.append(ToolCall(item["id"], name, arguments if problem is None else {},
                              raw, problem))
    return calls


def to_letta(message: Message, file_id: str, agent_file_id: str, model: str | None, *,
             approval_request: bool = False) -> dict[str, Any]:
    """A stateloop message as Letta's importer reads it."""
    role = "approval" if approval_request else message.role
    tool = message.role == "tool"
    return {
        "type": "message", "role": role,
        "content": [_part_to_letta(p) for p in message.content],
        "name": message.name if tool else None, "otid": None, "sender_id": None,
        "batch_item_id": None, "group_id": None, "id": file_id, "model": model,
        "agent_id": agent_file_id,
        "tool_calls": [{"id": c.id, "type": "function",
                        "function": {"name": c.name,
                                     "arguments": c.raw_arguments if c.raw_arguments
                                     is not None else json.dumps(c.arguments)}}
                       for c in message.tool_calls] or None,
        "tool_call_id": message.tool_call_id if tool else None,
        "tool_returns": [{"tool_call_id": message.tool_call_id,
                          "status": "error" if message.is_error else "success",
                          "stdout": None, "stderr": None, "func_response": message.text}]
        if tool else [],
        "created_at": iso(message.created_at), "approve": None, "approval_request_id": None,
        "denial_reason": None, "approvals": [],
    }


def _part_to_letta(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text, "signature": None}
    if isinstance(part, ReasoningPart):
        if part.redacted:
            return {"type": "redacted_reasoning", "data": part.text}
        return {"type": "reasoning", "is_native": True, "reasoning": part.text,
                "signature": part.signature}
    if part.url.startswith("data:") and ";base64," in part.url:
        header, data = part.url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": header,
                                            "data": data, "detail": None}}
    return {"type": "image", "source": {"type": "url", "url": part.url}}
