"""Provider-neutral messages: the one transcript format every layer speaks."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from .surrogates import replace_lone_surrogates

Role = Literal["system", "user", "assistant", "tool"]


def new_id(kind: str) -> str:
    """A new id in Letta's ``kind-<uuid4>`` shape (e.g. ``message-...``) that no client can
    guess from another: the time in milliseconds, then 74 random bits, as a version 7 UUID
    lays them out but with version 4's digits. A table's id index grows at its end instead of
    touching a random page per row; no order depends on ids (ties of ``created_at`` aside)."""
    r = os.urandom(10).hex()
    t = f"{time.time_ns() // 1_000_000:012x}"
    return f"{kind}-{t[:8]}-{t[8:]}-4{r[:3]}-{_VARIANT[r[3]]}{r[4:7]}-{r[7:19]}"


_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}
new_uuid_id = new_id  # the same ids, under a name that says their shape


def new_call_id(kind: str = "call") -> str:
    """A new tool call id, 96 random bits: short enough for every provider it goes back to
    (OpenAI takes 40 characters at most)."""
    return f"{kind}-{os.urandom(12).hex()}"


@dataclass(slots=True)
class TextPart:
    text: str
    type: Literal["text"] = "text"


@dataclass(slots=True)
class ReasoningPart:
    """Model reasoning; ``signature`` and ``model`` let a provider verify its own thinking."""

    text: str
    signature: str | None = None
    model: str | None = None
    redacted: bool = False
    type: Literal["reasoning"] = "reasoning"


@dataclass(slots=True)
class ImagePart:
    url: str  # an http(s) URL or a data: URL
    media_type: str | None = None
    type: Literal["image"] = "image"


Part = TextPart | ReasoningPart | ImagePart


@dataclass(slots=True)
class ToolCall:
    """A call the model asked for: ``arguments`` parsed, ``raw_arguments`` the exact text."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None
    parse_error: str | None = None  # set when ``raw_arguments`` is not a JSON object

    def to_dict(self) -> dict[str, Any]:
        data = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.raw_arguments is not None:
            data["raw_arguments"] = self.raw_arguments
        if self.parse_error is not None:
            data["parse_error"] = self.parse_error
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(data["id"], data["name"], dict(data.get("arguments") or {}),
                   data.get("raw_arguments"), data.get("parse_error"))


@dataclass(slots=True)
class Usage:
    """Token usage. ``reasoning_tokens`` is part of ``output_tokens``, never added on top."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cache_write_tokens += other.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cached_input_tokens": self.cached_input_tokens,
                "reasoning_tokens": self.reasoning_tokens,
                "cache_write_tokens": self.cache_write_tokens}


@dataclass(slots=True)
class Message:
    """One transcript entry; ``system``, ``user``, ``assistant`` and ``tool_result`` build them."""

    role: Role
    content: list[Part] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # tool messages: the call this answers
    name: str | None = None  # tool messages: the tool's name
    is_error: bool = False  # tool messages: the call failed
    id: str = field(default_factory=lambda: new_id("message"))
    created_at: float = field(default_factory=time.time)
    token_count: int | None = None  # counted once, kept with the message
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        parts = self.content
        if len(parts) == 1 and type(parts[0]) is TextPart:
            return parts[0].text
        if not parts:  # a tool call without text: on the step path, so no generator
            return ""
        return "".join(p.text for p in parts if type(p) is TextPart)

    @property
    def reasoning(self) -> str:
        return "".join(p.text for p in self.content if type(p) is ReasoningPart)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``Message.from_dict`` reverses it."""
        data: dict[str, Any] = {"id": self.id, "role": self.role, "created_at": self.created_at,
                                **self.body()}
        if self.token_count is not None:
            data["token_count"] = self.token_count
        return data

    def body(self) -> dict[str, Any]:
        """``to_dict`` without the id, role, creation time and token count (which a store
        keeps in columns of their own)."""
        data: dict[str, Any] = {"content": [_part_to_dict(p) for p in self.content]}
        if self.tool_calls:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.role == "tool":
            data["tool_call_id"] = self.tool_call_id
            data["name"] = self.name
            data["is_error"] = self.is_error
        if self.metadata:
            data["metadata"] = self.metadata
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        return cls(
            role=sys.intern(data["role"]),  # type: ignore[arg-type]  # one string a role
            content=[_part_from_dict(p) for p in data.get("content", [])],
            tool_calls=[ToolCall.from_dict(c) for c in data.get("tool_calls", [])],
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            is_error=bool(data.get("is_error", False)),
            id=data.get("id") or new_id("message"),
            created_at=data.get("created_at") or time.time(),
            token_count=data.get("token_count"),
            metadata=dict(data.get("metadata") or {}),
        )


def _part_to_dict(part: Part) -> dict[str, Any]:
    if type(part) is TextPart:
        return {"type": "text", "text": part.text}
    if type(part) is ReasoningPart:
        return {"type": "reasoning", "text": part.text, "signature": part.signature,
                "model": part.model, "redacted": part.redacted}
    assert type(part) is ImagePart
    return {"type": "image", "url": part.url, "media_type": part.media_type}


def _part_from_dict(data: dict[str, Any]) -> Part:
    kind = data.get("type")
    if kind == "text":
        return TextPart(data["text"])
    if kind == "reasoning":
        return ReasoningPart(data["text"], data.get("signature"), data.get("model"),
                             bool(data.get("redacted", False)))
    if kind == "image":
        return ImagePart(data["url"], data.get("media_type"))
    raise ValueError(f"unknown message part type {kind!r}; expected 'text', 'reasoning' or 'image'")


def system(text: str) -> Message:
    return Message("system", [TextPart(text)])


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


def assistant(text: str = "", tool_calls: list[ToolCall] | None = None,
              reasoning: str = "") -> Message:
    content: list[Part] = []
    if reasoning:
        content.append(ReasoningPart(reasoning))
    if text:
        content.append(TextPart(text))
    return Message("assistant", content, tool_calls or [])


def tool_result(call: ToolCall, text: str, *, is_error: bool = False) -> Message:
    """The result of ``call``; lone surrogates in a tool's output become U+FFFD."""
    return Message("tool", [TextPart(replace_lone_surrogates(text))], tool_call_id=call.id,
                   name=call.name, is_error=is_error)


def unanswered_calls(messages: list[Message]) -> list[ToolCall]:
    """The calls of the last assistant message that no tool result after it answers."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role == "tool" and message.tool_call_id:
            answered.add(message.tool_call_id)
        elif message.role == "assistant":
            return [call for call in message.tool_calls if call.id not in answered]
        else:
            return []
    return []
