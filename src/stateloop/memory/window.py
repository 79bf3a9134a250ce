"""What fills the context window: Letta's overview, and a message-by-message debug view."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..llm.base import ToolSpec
from ..llm.tokens import count_tokens, message_tokens
from ..messages import Message
from .compaction import is_summary, tool_tokens


@dataclass(slots=True)
class ContextWindowOverview:
    """The fields of Letta's ``ContextWindowOverview`` (``GET /v1/agents/{id}/context``)."""

    context_window_size_max: int
    context_window_size_current: int
    num_messages: int
    num_archival_memory: int
    num_recall_memory: int
    num_tokens_external_memory_summary: int
    external_memory_summary: str
    num_tokens_system: int
    system_prompt: str
    num_tokens_core_memory: int
    core_memory: str
    num_tokens_tool_usage_rules: int
    tool_usage_rules: str | None
    num_tokens_summary_memory: int
    summary_memory: str | None
    num_tokens_functions_definitions: int
    functions_definitions: list[dict[str, Any]] | None
    num_tokens_messages: int
    messages: list[Message] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}
        data["messages"] = [m.to_dict() for m in self.messages]
        return data


def overview(*, window: int, transcript: list[Message], tools: list[ToolSpec],
             instructions: str, core_memory: str, memory_metadata: str, rules: str,
             recall_count: int, archival_count: int, model: str | None) -> ContextWindowOverview:
    """Count each part of the next request once (message counts are kept on the messages)."""
    summary = transcript[1] if len(transcript) > 1 and is_summary(transcript[1]) else None
    messages = transcript[2:] if summary is not None else transcript[1:]
    sizes = {
        "system": count_tokens(instructions, model),
        "core": count_tokens(core_memory, model),
        "external": count_tokens(memory_metadata, model),
        "rules": count_tokens(rules, model),
        "summary": message_tokens(summary, model) if summary is not None else 0,
        "tools": tool_tokens(tools, model),
        "messages": sum(message_tokens(m, model) for m in messages),
    }
    return ContextWindowOverview(
        context_window_size_max=window,
        context_window_size_current=sum(sizes.values()),
        num_messages=len(transcript),
        num_archival_memory=archival_count,
        num_recall_memory=recall_count,
        num_tokens_external_memory_summary=sizes["external"],
        external_memory_summary=memory_metadata,
        num_tokens_system=sizes["system"],
        system_prompt=transcript[0].text,
        num_tokens_core_memory=sizes["core"],
        core_memory=core_memory,
        num_tokens_tool_usage_rules=sizes["rules"],
        tool_usage_rules=rules or None,
        num_tokens_summary_memory=sizes["summary"],
        summary_memory=summary.text if summary is not None else None,
        num_tokens_functions_definitions=sizes["tools"],
        functions_definitions=[{"type": "function", "function": t.to_dict()} for t in tools]
        or None,
        num_tokens_messages=sizes["messages"],
        messages=list(transcript),
    )


@dataclass(slots=True)
class ContextRow:
    """One line of the debug view: a message of the assembled context."""

    index: int
    role: str
    kind: str  # "system", "summary", "message", "tool call", "tool result"
    tokens: int
    preview: str


def context_rows(transcript: list[Message], model: str | None) -> list[ContextRow]:
    """The assembled context message by message, with each one's token count."""
    rows = []
    for index, message in enumerate(transcript):
        if index == 0:
            kind = "system"
        elif is_summary(message):
            kind = "summary"
        elif message.role == "tool":
            kind = "tool result"
        elif message.tool_calls:
            kind = "tool call"
        else:
            kind = "message"
        text = message.text
        if message.tool_calls:
            calls = ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in message.tool_calls)
            text = f"{text} {calls}".strip()
        preview = " ".join(text.split())
        rows.append(ContextRow(index, message.role, kind, message_tokens(message, model),
                               preview[:117] + "..." if len(preview) > 120 else preview))
    return rows


def format_context(rows: list[ContextRow], window: int) -> str:
    """The debug view as plain text: one row a message, then the total against the window."""
    lines = [f"{'#':>4}  {'role':<9} {'kind':<11} {'tokens':>7}  content"]
    for row in rows:
        lines.append(f"{row.index:>4}  {row.role:<9} {row.kind:<11} {row.tokens:>7}  "
                     f"{row.preview}")
    total = sum(row.tokens for row in rows)
    lines.append(f"total {total} tokens in {len(rows)} messages; window {window} "
                 f"({100 * total / window:.1f}% used)")
    return "\n".join(lines)
