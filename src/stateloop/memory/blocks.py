"""Core memory blocks: labelled text that is always in the agent's context."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..messages import new_id
from ..store.memory_files import label_problem
from ..surrogates import check

DEFAULT_BLOCK_LIMIT = 100_000  # Letta's CORE_MEMORY_BLOCK_CHAR_LIMIT (0.16.8)


@dataclass(slots=True)
class Block:
    """A core memory block. ``limit`` is in characters; ``read_only`` blocks refuse edits."""

    label: str
    value: str = ""
    description: str | None = None
    limit: int = DEFAULT_BLOCK_LIMIT
    read_only: bool = False
    id: str = field(default_factory=lambda: new_id("block"))

    def __post_init__(self) -> None:
        for what, text in (("label", self.label), ("value", self.value),
                           ("description", self.description or "")):
            check(text, f"block {self.label!r}: {what}")
        # A label is a path (``system/persona``, ``skills/pdf``), as Letta's labels are.
        problem = label_problem(self.label)
        if problem is not None:
            raise ValueError(problem)
        if self.limit <= 0:
            raise ValueError(f"block {self.label!r}: limit must be positive, got {self.limit}")
        if len(self.value) > self.limit:
            raise ValueError(f"block {self.label!r}: value has {len(self.value)} characters, "
                             f"over its limit of {self.limit}")


def render_blocks(blocks: list[Block]) -> str:
    """The ``<memory_blocks>`` section of the system prompt, in Letta's layout."""
    if not blocks:
        return ""
    parts = ["<memory_blocks>",
             "The following memory blocks are currently engaged in your core memory unit:", ""]
    for block in blocks:
        parts.append(f"<{block.label}>")
        if block.description:
            parts.append(f"<description>\n{block.description}\n</description>")
        read_only = "- read_only=true\n" if block.read_only else ""
        parts.append(f"<metadata>\n{read_only}- chars_current={len(block.value)}\n"
                     f"- chars_limit={block.limit}\n</metadata>")
        parts.append(f"<value>\n{block.value}\n</value>")
        parts.append(f"</{block.label}>")
        parts.append("")
    parts.append("</memory_blocks>")
    return "\n".join(parts)


def render_memory_metadata(recall_count: int, archival_count: int, *, agent_id: str,
                           conversation_id: str | None = None, timezone: str = "UTC") -> str:
    """The ``<memory_metadata>`` section as Letta 0.16.8 writes it: the agent and
    conversation ("default": the agent's own thread), when the prompt was compiled (in the
    agent's timezone), and what lies outside the context."""
    lines = ["<memory_metadata>", f"- AGENT_ID: {agent_id}",
             f"- CONVERSATION_ID: {conversation_id or 'default'}",
             f"- System prompt last recompiled: {compiled_at(timezone)}",
             f"- {recall_count} previous messages between you and the user are stored in "
             "recall memory"]
    if archival_count > 0:
        lines.append(f"- {archival_count} total memories you created are stored in archival "
                     "memory (use tools to access them)")
    lines.append("</memory_metadata>")
    return "\n".join(lines)


def compiled_at(timezone: str) -> str:
    """Now, as Letta dates a compiled prompt: ``2026-01-15 09:00:00 AM UTC+0000``; an unknown
    timezone counts as UTC."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    return datetime.now(UTC).astimezone(zone).strftime("%Y-%m-%d %I:%M:%S %p %Z%z")
