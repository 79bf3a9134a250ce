"""The context debug view: Letta's context-window figures, then the messages."""

from __future__ import annotations

import json
from typing import Any

from .console import shorten

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


def overview_text(data: dict[str, Any]) -> str:
    """Letta's ``ContextWindowOverview`` figures as a few aligned lines."""
    window = int(data.get("context_window_size_max") or 0)
    used = int(data.get("context_window_size_current") or 0)
    share = f" ({100 * used / window:.1f}%)" if window else ""
    lines = [f"context window: {used} of {window} tokens{share}"]
    lines += [f"  {label:<16}{int(data.get(key) or 0):>8}" for label, key in _PARTS]
    lines.append(f"in context: {data.get('num_messages', 0)} messages; recall: "
                 f"{data.get('num_recall_memory', 0)} messages; archival: "
                 f"{data.get('num_archival_memory', 0)} passages")
    return "\n".join(lines)


def remote_messages_text(data: dict[str, Any]) -> str:
    """The overview's messages, one a line, with token counts where the server sends them."""
    lines = [f"{'#':>4}  {'role':<9} {'tokens':>7}  content"]
    for index, message in enumerate(data.get("messages") or []):
        role = str(message.get("role") or message.get("message_type") or "?")
        tokens = message.get("token_count")
        count = str(tokens) if isinstance(tokens, int) else "-"
        lines.append(f"{index:>4}  {role:<9} {count:>7}  {shorten(_message_text(message))}")
    return "\n".join(lines)


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
