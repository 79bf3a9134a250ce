"""Letta's path-addressed memory tools: ``memory`` (create, str_replace, insert, delete, rename
and describe blocks) and ``memory_apply_patch`` (a diff of one block, or a multi-block
patch). Names, arguments and answers are Letta's; a refused call raises ``ValueError`` with
Letta's text and changes nothing."""

from __future__ import annotations

import re
from typing import Any

from ..tools.base import ToolContext
from . import live_blocks, patches
from .blocks import Block
from .editing import write_block

# What the model may copy from a block shown with line numbers ("12→ text"), and the banner
# shown above such a block (Letta's MEMORY_TOOLS_LINE_NUMBER_PREFIX_REGEX and warning).
_LINE_NUMBER = re.compile(r"^[ \t]*\d+→[ \t]*", re.MULTILINE)
LINE_NUMBER_WARNING = ("# NOTE: Line numbers shown below (with arrows like '1→') are to help "
                       "during editing. Do NOT include line number prefixes in your memory "
                       "edit tool calls.")
_RECOMPILED = "Your system prompt has been recompiled with {} and is now active in your context."


def _no_line_numbers(field: str, text: str) -> None:
    if _LINE_NUMBER.search(text):
        raise ValueError(f"{field} contains a line number prefix, which is not allowed. Do not "
                         f"include line numbers when calling memory tools (line numbers are "
                         f"for display purposes only).")
    if LINE_NUMBER_WARNING in text:
        raise ValueError(f"{field} contains a line number warning, which is not allowed. Do "
                         f"not include line number information when calling memory tools "
                         f"(line numbers are for display purposes only).")


def path_label(path: str) -> str:
    """The label a path names: ``/memories/notes``, ``/notes`` and ``notes`` all name
    ``notes``; what follows the one prefix is the label, whole (``/memories//x`` is no
    label)."""
    path = path.strip()
    for prefix in ("/memories/", "/"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def _block(agent: Any, path: str) -> Block:
    """The block a path names. Letta reads ``a/b`` as the label ``a_b`` in some commands and
    as ``a/b`` in others: either label is found."""
    label = path_label(path)
    blocks = agent.blocks
    for wanted in (label, label.replace("/", "_")):
        for block in blocks:
            if block.label == wanted:
                return block
    raise ValueError(f"Error: Memory block '{label}' does not exist")


def _editable(agent: Any, path: str) -> Block:
    block = _block(agent, path)
    if block.read_only:
        raise ValueError(patches.READ_ONLY_ERROR)
    return block


def _required(command: str, **values: object) -> None:
    for name, value in values.items():
        if value is None:
            raise ValueError(f"Error: {name} is required for {command} command")


async def memory(ctx: ToolContext, command: str, path: str | None = None,
                 file_text: str | None = None, description: str | None = None,
                 old_string: str | None = None, new_string: str | None = None,
                 insert_line: int | None = None, insert_text: str | None = None,
                 old_path: str | None = None, new_path: str | None = None) -> str:
    """Memory management tool with sub-commands for memory block operations.

    Blocks are addressed by path: "/memories/<label>" (or just the label).
    - create: a new block at `path` with a `description` and optional `file_text`.
    - str_replace: in the block at `path`, replace `old_string` (which must occur exactly
      once) with `new_string`.
    - insert: insert `insert_text` after line `insert_line` of the block at `path` (0 for
      the beginning, -1 or none for the end).
    - delete: remove the block at `path` from memory.
    - rename: move the block at `old_path` to `new_path`; or, given `path` and
      `description`, update that block's description.
    Usage:
    memory(command="str_replace", path="/memories/human", old_string="theme: dark",
           new_string="theme: light")
    memory(command="insert", path="/memories/notes", insert_line=5, insert_text="New note")
    memory(command="create", path="/memories/coding_preferences",
           description="The user's coding preferences.", file_text="Uses type hints.")
    memory(command="rename", old_path="/memories/temp", new_path="/memories/permanent")
    memory(command="rename", path="/memories/temp", description="Temporary notes.")
    memory(command="delete", path="/memories/old_notes")

    Args:
        command: The sub-command to execute: "create", "str_replace", "insert", "delete" or
            "rename".
        path: Path to the memory block (for create, str_replace, insert, delete, and rename
            when updating a description).
        file_text: The value to set in the memory block (for create).
        description: The description to set in the memory block (for create, rename).
        old_string: Old text to replace (for str_replace).
        new_string: New text to replace with (for str_replace).
        insert_line: Line number to insert at (for insert).
        insert_text: Text to insert (for insert).
        old_path: Old path for rename operation.
        new_path: New path for rename operation.
    """
    agent = ctx.agent
    if command == "create":
        _required(command, path=path, description=description)
        assert path is not None and description is not None
        label = path_label(path)
        await live_blocks.add_block(agent, label, file_text or "", description)
        return (f"Successfully created memory block '{label}'. "
                + _RECOMPILED.format("the new memory block"))
    if command == "str_replace":
        _required(command, path=path, old_string=old_string, new_string=new_string)
        assert path is not None and old_string is not None and new_string is not None
        return _str_replace(agent, path, old_string, new_string)
    if command == "insert":
        _required(command, path=path, insert_text=insert_text)
        assert path is not None and insert_text is not None
        return _insert(agent, path, insert_text, -1 if insert_line is None else insert_line)
    if command == "delete":
        _required(command, path=path)
        assert path is not None
        block = _editable(agent, path)
        await live_blocks.drop_block(agent, block)
        return (f"Successfully deleted memory block '{block.label}'. Your system prompt has "
                f"been recompiled without this memory block and is now active in your context.")
    if command == "rename":
        if path and description:
            block = _editable(agent, path)
            await live_blocks.describe(agent, block, description)
            return (f"Successfully updated description of memory block '{block.label}'. "
                    + _RECOMPILED.format("the updated description"))
        if old_path and new_path:
            block = _editable(agent, old_path)
            old_label, new_label = block.label, path_label(new_path)
            await live_blocks.relabel(agent, block, new_label)
            return (f"Successfully renamed memory block '{old_label}' to '{new_label}'. "
                    + _RECOMPILED.format("the renamed memory block"))
        raise ValueError("Error: path and description are required for update_description "
                         "command, or old_path and new_path are required for rename command")
    raise ValueError(f"Error: Unknown command '{command}'. Supported commands: create, "
                     f"str_replace, insert, delete, rename")


def _str_replace(agent: Any, path: str, old_string: str, new_string: str) -> str:
    block = _editable(agent, path)
    _no_line_numbers("old_string", old_string)
    _no_line_numbers("new_string", new_string)
    old, new = old_string.expandtabs(), new_string.expandtabs()
    current = block.value.expandtabs()
    count = current.count(old)
    if count == 0:
        raise ValueError(f"No replacement was performed, old_string `{old}` did not appear "
                         f"verbatim in memory block with label `{block.label}`.")
    if count > 1:
        lines = [n for n, line in enumerate(current.split("\n"), 1) if old in line]
        raise ValueError(f"No replacement was performed. Multiple occurrences of old_string "
                         f"`{old}` in lines {lines}. Please ensure it is unique.")
    write_block(agent, block, current.replace(old, new))
    return block.value


def _insert(agent: Any, path: str, insert_text: str, insert_line: int) -> str:
    block = _editable(agent, path)
    _no_line_numbers("insert_text", insert_text)
    lines = block.value.expandtabs().split("\n") if block.value else []
    if insert_line == -1:
        insert_line = len(lines)
    elif not 0 <= insert_line <= len(lines):
        raise ValueError(f"Invalid `insert_line` parameter: {insert_line}. It should be within "
                         f"the range of lines of the memory block: {[0, len(lines)]}, or -1 to "
                         f"append to the end of the memory block.")
    lines[insert_line:insert_line] = insert_text.expandtabs().split("\n")
    write_block(agent, block, "\n".join(lines))
    return block.value


async def memory_apply_patch(ctx: ToolContext, label: str, patch: str) -> str:
    """Apply a simplified unified-diff style patch to one or more memory blocks.

    Without "***" headers, `patch` is a diff of the single block `label`: lines start with
    " " (context), "-" (remove) or "+" (add); "@@" lines separate hunks, and each hunk's
    context must match exactly one place in the block.
    With headers (set `label` to ""), each section acts on one block:
    - "*** Add Block: <label>", an optional "Description: <text>" line, then the new block's
      lines, each starting with "+";
    - "*** Update Block: <label>", then a diff as above;
    - "*** Delete Block: <label>";
    - "*** Move to: <new label>" renames the block of the section it follows.
    Do not include line number prefixes such as "12→" or the line-number warning banner;
    tabs are turned into spaces before matching. The whole patch applies, or nothing does.

    Args:
        label: The label of the memory block to patch. Required for single-block mode (when
            patch contains no "***" headers). Set to empty string "" when using multi-block
            mode with "*** Add Block:", "*** Delete Block:", or "*** Update Block:" headers.
        patch: The unified diff-style patch to apply: a simple diff of one block, or a
            multi-block patch with "***" headers that creates, deletes, updates or renames
            blocks.
    """
    if _LINE_NUMBER.search(patch):
        raise ValueError("Patch contains a line number prefix, which is not allowed. Do not "
                         "include line numbers (they are for display only).")
    if LINE_NUMBER_WARNING in patch:
        raise ValueError("Patch contains the line number warning banner, which is not "
                         "allowed. Provide only the text to edit.")
    agent = ctx.agent
    patch = patch.expandtabs()
    if not patches.is_multi_block(patch):
        block = next((b for b in agent.blocks if b.label == label), None)
        if block is None:
            raise ValueError(f"Error: Memory block '{label}' does not exist")
        if block.read_only:
            raise ValueError(patches.READ_ONLY_ERROR)
        write_block(agent, block, patches.apply_hunks(block.value, patch))
        return block.value
    changes = patches.plan(patches.parse(patch), agent.blocks)
    for change in changes:
        if change.kind == "create":
            await live_blocks.add_block(agent, change.label, change.value,
                                        change.description)
            continue
        block = next(b for b in agent.blocks if b.label == change.label)
        if change.kind == "update":
            write_block(agent, block, change.value)
        elif change.kind == "delete":
            await live_blocks.drop_block(agent, block)
        else:
            await live_blocks.relabel(agent, block, change.new_label)
    return ("Successfully applied memory patch operations. "
            + _RECOMPILED.format("the updated memory contents")
            + "\n\nOperations completed:\n- " + "\n- ".join(c.done for c in changes))


PATH_MEMORY_TOOLS = (memory, memory_apply_patch)
