"""The context debug view: Letta's context-window figures, then the messages."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .console import shorten

if TYPE_CHECKING:
    from ..memory.window import ContextRow

# (label, key) for each part of the window, in the order they are sent.
_PARTS = (
    ("system prompt", "num_tokens_system"),
    ("core memory", "num_tokens_core_memory"),
    ("memory metadata", "num_tokens_external_memory_summary"),
    ("tool rules", "num_tokens_tool_usage_rules"),
    ("summary", "num_tokens_summary_memory"),
    ("tool schemas", "num_tokens_functions_definitions"),
    ("messages", "num_tokens_messages"),
)


def _usage(data: dict[str, Any]) -> str:
    """``used of window tokens (share)``: the one total, above the parts and under the rows."""
    window = int(data.get("context_window_size_max") or 0)
    used = int(data.get("context_window_size_current") or 0)
    share = f" ({100 * used / window:.1f}%)" if window else ""
    return f"{used} of {window} tokens{share}"


def total_line(data: dict[str, Any]) -> str:
    """The view's last line: the header's total, saying what it holds besides the rows."""
    tools = int(data.get("num_tokens_functions_definitions") or 0)
    return (f"total {_usage(data)}: the messages above and {tools} tokens of tool schemas "
            "(a message's count includes its framing)")


def overview_text(data: dict[str, Any]) -> str:
    """Letta's ``ContextWindowOverview`` figures as a few aligned lines."""
    lines = [f"context window: {_usage(data)}"]
    lines += [f"  {label:<16}{int(data.get(key) or 0):>8}" for label, key in _PARTS]
    lines.append(f"in context: {data.get('num_messages', 0)} messages; recall: "
                 f"{data.get('num_recall_memory', 0)} messages; archival: "
                 f"{data.get('num_archival_memory', 0)} passages")
    return "\n".join(lines)


def local_messages_text(data: dict[str, Any], rows: list[ContextRow]) -> str:
    """The assembled context message by message with tokens, then the total."""
    lines = [f"{'#':>4}  {'role':<9} {'kind':<11} {'tokens':>7}  content"]
    lines += [f"{row.index:>4}  {row.role:<9} {row.kind:<11} {row.tokens:>7}  {row.preview}"
              for row in rows]
    return "\n".join([*lines, total_line(data)])


def remote_messages_text(data: dict[str, Any]) -> str:
    """The overview's messages, one a line, with token counts where the server sends them."""
    lines = [f"{'#':>4}  {'role':<9} {'tokens':>7}  content"]
    for index, message in enumerate(data.get("messages") or []):
        role = str(message.get("role") or message.get("message_type") or "?")
        tokens = message.get("token_count")
        count = str(tokens) if isinstance(tokens, int) else "-"
        lines.append(f"{index:>4}  {role:<9} {count:>7}  {shorten(_message_text(message))}")
    return "\n".join([*lines, total_line(data)])


def _message_text(message: dict[str, Any]) -> str:
    """The text of a message as the server sent it, then its tool calls."""
    parts: list[str] = []
    for key in ("text", "content", "tool_return", "reasoning"):
        value = message.get(key)
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):  # content parts
            parts += [str(p.get("text", "")) for p in value if isinstance(p, dict)]
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            arguments = call.get("arguments")
            shown = arguments if isinstance(arguments, str) else json.dumps(arguments)
            parts.append(f"{call.get('name')}({shown})")
    return " ".join(part for part in parts if part)
