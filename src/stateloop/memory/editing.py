"""Core memory edits: the tools an agent uses on its own memory blocks (Letta's semantics).

Every edit checks the block exists, is writable and stays within its limit; a refused edit
raises ``ValueError`` with a message for the model and changes nothing.
"""

from __future__ import annotations

import re
from typing import Any

from ..surrogates import check
from ..tools.base import ToolContext
from .blocks import Block

_LINE_PREFIX = re.compile(r"\nLine \d+: ")


def find_block(agent: Any, label: str) -> Block:
    """The agent's block labelled ``label``; the error lists the labels that exist."""
    for block in agent.blocks:
        if block.label == label:
            return block
    labels = ", ".join(b.label for b in agent.blocks) or "none"
    raise ValueError(f"no memory block labelled {label!r}; blocks: {labels}")


def write_block(agent: Any, block: Block, value: str) -> None:
    """Set a block's value after the read-only and limit checks; the prompt then recompiles."""
    if block.read_only:
        raise ValueError(f"memory block {block.label!r} is read-only and cannot be edited")
    check(value, f"edit refused: memory block {block.label!r}: the new value")
    if len(value) > block.limit:
        raise ValueError(
            f"edit refused: memory block {block.label!r} would hold {len(value)} characters, "
            f"over its limit of {block.limit} (it holds {len(block.value)} now); "
            f"shorten the text or remove something first")
    block.value = value
    agent.memory_changed(block)


def _no_line_numbers(field: str, text: str) -> None:
    if _LINE_PREFIX.search(text):
        raise ValueError(f"{field} contains a line number prefix ('Line N: '); line numbers "
                         f"are for display only, leave them out")


async def memory_insert(ctx: ToolContext, label: str, new_string: str,
                        insert_line: int = -1) -> str:
    """Insert text at a specific line in a memory block.

    Args:
        label: Section of the memory to be edited, identified by its label.
        new_string: The text to insert. Do not include line number prefixes.
        insert_line: The line number after which to insert the text (0 for the beginning).
            Defaults to -1 (the end of the block).
    """
    _no_line_numbers("new_string", new_string)
    block = find_block(ctx.agent, label)
    lines = block.value.expandtabs().split("\n") if block.value else []
    if insert_line == -1:
        insert_line = len(lines)
    elif not 0 <= insert_line <= len(lines):
        raise ValueError(f"insert_line {insert_line} is outside the block's lines: use 0 to "
                         f"{len(lines)}, or -1 for the end")
    new_lines = new_string.expandtabs().split("\n")
    write_block(ctx.agent, block, "\n".join(lines[:insert_line] + new_lines + lines[insert_line:]))
    return f"Inserted into memory block {label!r}; it now holds {len(block.value)} characters."


async def memory_replace(ctx: ToolContext, label: str, old_string: str, new_string: str) -> str:
    """Replace a specific string in a memory block with a new string, for precise edits.

    Args:
        label: Section of the memory to be edited, identified by its label.
        old_string: The text to replace; must occur exactly once, whitespace included.
        new_string: The new text (empty to delete). Do not include line number prefixes.
    """
    _no_line_numbers("old_string", old_string)
    _no_line_numbers("new_string", new_string)
    block = find_block(ctx.agent, label)
    current = block.value.expandtabs()
    old = old_string.expandtabs()
    count = current.count(old) if old else 0
    if count == 0:
        raise ValueError(f"no replacement made: old_string {old_string!r} does not occur "
                         f"verbatim in memory block {label!r}")
    if count > 1:
        lines = [i + 1 for i, line in enumerate(current.split("\n")) if old in line]
        raise ValueError(f"no replacement made: old_string {old_string!r} occurs {count} times "
                         f"(lines {lines}); include more context so it is unique")
    write_block(ctx.agent, block, current.replace(old, new_string.expandtabs()))
    return f"Replaced text in memory block {label!r}; it now holds {len(block.value)} characters."


async def memory_rethink(ctx: ToolContext, label: str, new_memory: str) -> str:
    """Rewrite a memory block completely, for sweeping reorganisations (not small edits).

    Args:
        label: The memory block to be rewritten, identified by its label.
        new_memory: The block's new contents.
    """
    _no_line_numbers("new_memory", new_memory)
    write_block(ctx.agent, find_block(ctx.agent, label), new_memory)
    return f"Rewrote memory block {label!r} ({len(new_memory)} characters)."


async def memory_finish_edits(ctx: ToolContext) -> str:
    """Call when finished editing (integrating all new information into) the memory blocks."""
    return "Memory edits finished."


async def core_memory_append(ctx: ToolContext, label: str, content: str) -> str:
    """Append to the contents of core memory.

    Args:
        label: Section of the memory to be edited.
        content: Content to write to the memory. All unicode (including emojis) is supported.
    """
    block = find_block(ctx.agent, label)
    write_block(ctx.agent, block, f"{block.value}\n{content}" if block.value else content)
    return block.value


async def core_memory_replace(ctx: ToolContext, label: str, old_content: str,
                              new_content: str) -> str:
    """Replace the contents of core memory. To delete memories, use an empty new_content.

    Args:
        label: Section of the memory to be edited.
        old_content: String to replace. Must be an exact match.
        new_content: Content to write to the memory. All unicode (including emojis) is supported.
    """
    block = find_block(ctx.agent, label)
    if not old_content or old_content not in block.value:
        raise ValueError(f"old content {old_content!r} not found in memory block {label!r}")
    write_block(ctx.agent, block, block.value.replace(old_content, new_content))
    return block.value


MEMORY_TOOLS = (memory_insert, memory_replace, memory_rethink, memory_finish_edits,
                core_memory_append, core_memory_replace)
