"""Core memory blocks: labelled text that is always in the agent's context."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..messages import new_id
from ..surrogates import check

DEFAULT_BLOCK_LIMIT = 100_000  # Letta's CORE_MEMORY_BLOCK_CHAR_LIMIT (0.16.8)


_LABEL_PUNCTUATION = str.maketrans("", "", "_-/.")


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
        # '/' and '.' as Letta allows them (labels such as "projects/stateloop").
        if not self.label or not self.label.translate(_LABEL_PUNCTUATION).isalnum():
            raise ValueError(f"block label {self.label!r} must be non-empty letters, digits, "
                             f"'_', '-', '/' or '.'")
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


def render_memory_metadata(recall_count: int, archival_count: int) -> str:
    """The ``<memory_metadata>`` section: what lies outside the context, and the date."""
    now = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return ("<memory_metadata>\n"
            f"- The current system date is: {now}\n"
            f"- {recall_count} previous messages between you and the user are stored in "
            "recall memory (use tools to access them)\n"
            f"- {archival_count} total memories you created are stored in archival memory "
            "(use tools to access them)\n"
            "</memory_metadata>")
