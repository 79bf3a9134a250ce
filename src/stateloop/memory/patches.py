"""Letta's memory patch format, read and applied without touching an agent.

A patch is either a simplified unified diff for one block (lines starting with ``" "``,
``"-"`` or ``"+"``, hunks split by ``@@`` lines), or a multi-block patch whose sections
start with ``*** Add Block: <label>`` (an optional ``Description:`` line, then ``+`` lines),
``*** Update Block: <label>`` (a diff as above), ``*** Delete Block: <label>``, and
``*** Move to: <label>`` (a new label for the block of the section it follows). ``plan``
checks a whole patch against the blocks before anything changes, so a patch that does not
apply changes nothing; every refusal is a ``ValueError`` worded as Letta words it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from .blocks import Block

READ_ONLY_ERROR = "Error This block is read-only and cannot be edited."  # Letta's words

_ADD, _UPDATE, _DELETE, _MOVE = ("*** Add Block:", "*** Update Block:", "*** Delete Block:",
                                 "*** Move to:")
_IGNORED_PREFIXES = ("*** ", "---", "+++")  # headers of the diff, not lines of the block


def is_multi_block(patch: str) -> bool:
    """Whether the patch has block headers (else it is a diff of the block it names)."""
    return any(line.startswith((_ADD, _UPDATE, _DELETE, _MOVE)) for line in patch.splitlines())


def _hunks(patch: str) -> list[tuple[list[str], list[str]]]:
    """``(lines expected, lines in their place)`` per hunk. A blank patch line is an empty
    context line; lines of any other shape are ignored."""
    hunks: list[list[str]] = [[]]
    for line in patch.splitlines():
        if line.startswith(_IGNORED_PREFIXES):
            continue
        if line.startswith("@@"):
            hunks.append([])
        elif line.startswith((" ", "-", "+")):
            hunks[-1].append(line)
        elif not line.strip():
            hunks[-1].append(" ")
    found = []
    for hunk in hunks:
        if not hunk:
            continue
        expected = [line[1:] for line in hunk if line[0] in " -"]
        replacement = [line[1:] for line in hunk if line[0] in " +"]
        found.append((expected, replacement))
    if not found:
        raise ValueError("No applicable hunks found in patch. Ensure lines start with ' ', "
                         "'-', or '+'.")
    return found


def apply_hunks(value: str, patch: str) -> str:
    """``value`` with the patch's hunks applied in order. Each hunk's expected lines must
    occur exactly once in the text as the earlier hunks left it; a hunk with only ``+``
    lines appends them."""
    lines = value.expandtabs().split("\n") if value else []
    for expected, replacement in _hunks(patch.expandtabs()):
        if not expected:
            lines += replacement
            continue
        width = len(expected)
        starts = [i for i in range(len(lines) - width + 1) if lines[i:i + width] == expected]
        if not starts:
            sample = "\n".join(expected[:4])
            raise ValueError("Failed to apply patch: expected hunk context not found in the "
                             "memory block. Verify the target lines exist and try providing "
                             f"more context. Expected start:\n{sample}")
        if len(starts) > 1:
            raise ValueError("Failed to apply patch: hunk context matched multiple places in "
                             "the memory block. Please add more unique surrounding context to "
                             "disambiguate.")
        lines[starts[0]:starts[0] + width] = replacement
    return "\n".join(lines)


@dataclass(slots=True)
class Section:
    """One ``*** ... Block:`` section of a multi-block patch."""

    kind: Literal["add", "update", "delete"]
    label: str
    description: str = ""
    body: list[str] = field(default_factory=list)
    move_to: str | None = None


def _header_label(line: str, header: str) -> str:
    label = line[len(header):].strip()
    if not label:
        raise ValueError(f"{header} must specify a non-empty "
                         f"{'new label' if header == _MOVE else 'label'}")
    return label


def parse(patch: str) -> list[Section]:
    """The sections of a multi-block patch, in order. Lines outside a section (``*** Begin
    Patch``, say) are ignored; ``*** Move to:`` renames the block of the section it follows,
    after that section's change."""
    sections: list[Section] = []
    lines = patch.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith(_ADD):
            section = Section("add", _header_label(line, _ADD))
            if i < len(lines) and lines[i].startswith("Description:"):
                section.description = lines[i].split(":", 1)[1].strip()
                i += 1
            sections.append(section)
        elif line.startswith(_UPDATE):
            sections.append(Section("update", _header_label(line, _UPDATE)))
        elif line.startswith(_DELETE):
            sections.append(Section("delete", _header_label(line, _DELETE)))
        elif line.startswith(_MOVE):
            label = _header_label(line, _MOVE)
            if not sections:
                raise ValueError("*** Move to: must follow an Add/Update/Delete header")
            if sections[-1].kind == "delete":
                raise ValueError(f"*** Move to: cannot follow *** Delete Block: "
                                 f"{sections[-1].label} (that block is deleted)")
            sections[-1].move_to = label
        elif sections and sections[-1].kind != "delete":
            sections[-1].body.append(line)
    if not sections:
        raise ValueError("No operations found. Provide at least one of: *** Add Block, "
                         "*** Delete Block, *** Update Block.")
    return sections


def _added_value(body: list[str]) -> str:
    """An added block's text: its ``+`` lines (blank lines kept, other lines ignored)."""
    kept = [line[1:] if line.startswith("+") else "" for line in body
            if line.startswith("+") or not line.strip()]
    return "\n".join(kept).rstrip("\n")


@dataclass(slots=True)
class Change:
    """One change to make, in order: ``create`` (``label``, ``value``, ``description``),
    ``update`` (``label`` gets ``value``), ``delete`` (``label``) or ``rename`` (``label``
    becomes ``new_label``); ``done`` is the line that reports it."""

    kind: Literal["create", "update", "delete", "rename"]
    label: str
    done: str
    value: str = ""
    description: str = ""
    new_label: str = ""


def plan(sections: Iterable[Section], blocks: Iterable[Block]) -> list[Change]:
    """The changes the sections make to ``blocks``, each checked against the blocks as the
    changes before it leave them (labels, read-only blocks, limits, hunks that apply):
    the first that cannot be made raises, before any is made."""
    state = {block.label: block for block in blocks}
    changes: list[Change] = []
    for section in sections:
        label = section.label
        if section.kind == "add":
            if label in state:
                raise ValueError(f"Error: Memory block '{label}' already exists")
            value = _added_value(section.body)
            state[label] = Block(label, value, section.description)
            changes.append(Change("create", label, f"Created memory block '{label}'", value,
                                  section.description))
        else:
            block = state.get(label)
            if block is None:
                raise ValueError(f"Error: Memory block '{label}' does not exist")
            if block.read_only:
                raise ValueError(READ_ONLY_ERROR)
            if section.kind == "delete":
                del state[label]
                changes.append(Change("delete", label, f"Deleted memory block '{label}'"))
                continue
            value = apply_hunks(block.value, "\n".join(section.body))
            state[label] = dataclasses.replace(block, value=value)  # checks the limit
            changes.append(Change("update", label, f"Updated memory block '{label}'", value))
        if section.move_to is not None and section.move_to != label:
            new = section.move_to
            if new in state:
                raise ValueError(f"Error: Memory block '{new}' already exists")
            state[new] = dataclasses.replace(state.pop(label), label=new)  # checks the label
            changes.append(Change("rename", label, f"Renamed memory block '{label}' to "
                                                   f"'{new}'", new_label=new))
    return changes
