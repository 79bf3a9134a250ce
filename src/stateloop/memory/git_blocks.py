"""Core memory in the system prompt as Letta 0.16.8 renders it for a git-backed agent (one
tagged ``git-memory-enabled``): ``system/persona`` as ``<self>``, the other ``system/*``
blocks as nested tags under ``<memory>``, and the blocks outside ``system/`` and ``skills/``
only as a file tree of the memory directory. Other agents keep ``<memory_blocks>``.

An agent in Letta Code's memfs-v2 layout (a block ``MEMORY``, the root index ``MEMORY.md``)
has its root files as core memory, as Letta Code's prompt tells the model: ``MEMORY`` and
every other block without a ``/`` in full under ``<memory>``, the rest as the file tree.

Skills (blocks ``skills/NAME``, the files ``skills/NAME/SKILL.md``) are never shown in full:
every agent's prompt lists them by name and description in ``<available_skills>``, as
Letta's ``compile_available_skills`` does, and the agent opens one with ``open_skill``
(memory/skills.py, which draws the list)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..store.memory_files import indexed, skill_name
from .blocks import Block, render_blocks
from .skills import render_skills

GIT_MEMORY_TAG = "git-memory-enabled"
_SYSTEM = "system/"
_PERSONA = "system/persona"
_REMINDER = "Reminder: <projection> contains the local path of the memory file projection."


def render_core_memory(blocks: list[Block], tags: Iterable[str]) -> str:
    """The core-memory section of an agent's system prompt, as its tags choose, and the
    skills it may open."""
    if GIT_MEMORY_TAG in tags:
        memory = render_git_blocks(blocks)
    else:
        memory = render_blocks([b for b in blocks if skill_name(b.label) is None])
    return "\n\n".join(part for part in (memory, render_skills(blocks)) if part)


def render_git_blocks(blocks: list[Block]) -> str:
    """Only ``system/`` blocks in full, labels without ``system/``; nothing without them.
    In the memfs-v2 layout, the root blocks in full instead."""
    if indexed(b.label for b in blocks):
        core = [b for b in blocks if "/" not in b.label]
        external = [b for b in blocks if "/" in b.label and skill_name(b.label) is None]
        lines = ["<memory>"]
        _render_tags(_tag_tree(core, ""), [], lines, "")
        if external:
            lines += ["<external_projection>", "${MEMORY_DIR}/"]
            _render_files(_file_tree(external), "", lines)
            lines.append("</external_projection>")
        lines.append("</memory>")
        return f"{_REMINDER}\n\n" + "\n".join(lines)
    system = [b for b in blocks if b.label.startswith(_SYSTEM)]
    if not system:
        return ""
    sections = [_REMINDER]
    persona = next((b for b in system if b.label == _PERSONA), None)
    if persona is not None:
        sections.append(f"<self>\n<projection>$MEMORY_DIR/{_PERSONA}.md</projection>\n"
                        f"{persona.value.rstrip(chr(10))}\n</self>")
    tagged = [b for b in system if b.label != _PERSONA]
    external = [b for b in blocks if not b.label.startswith((_SYSTEM, "skills/"))]
    if tagged or external:
        lines = ["<memory>"]
        _render_tags(_tag_tree(tagged, _SYSTEM), [], lines, _SYSTEM)
        if external:
            lines += ["<external_projection>", "${MEMORY_DIR}/"]
            _render_files(_file_tree(external), "", lines)
            lines.append("</external_projection>")
        lines.append("</memory>")
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


@dataclass(slots=True)
class _Tag:
    """One tag of ``<memory>``: the block of that label, if any, and the tags nested in it."""

    block: Block | None = None
    children: dict[str, _Tag] = field(default_factory=dict)


def _tag_tree(blocks: list[Block], folder: str) -> _Tag:
    root = _Tag()
    for block in blocks:
        node = root
        for part in _parts(block.label.removeprefix(folder)):
            node = node.children.setdefault(part, _Tag())
        if node is not root:
            node.block = block
    return root


def _render_tags(node: _Tag, path: list[str], lines: list[str], folder: str) -> None:
    pad = "  " * len(path)
    for name in sorted(node.children):
        child, where = node.children[name], [*path, name]
        lines.append(f"{pad}<{name}>")
        if child.block is not None:
            lines.append(f"{pad}  <projection>$MEMORY_DIR/{folder}{'/'.join(where)}.md"
                         "</projection>")
            if description := (child.block.description or "").strip():
                lines.append(f"{pad}  <description>{description}</description>")
            if value := child.block.value.rstrip("\n"):
                lines.append(f"{pad}  {value}")
        _render_tags(child, where, lines, folder)
        lines.append(f"{pad}</{name}>")


@dataclass(slots=True)
class _Folder:
    """A folder of the memory directory: its folders and its ``.md`` files."""

    folders: dict[str, _Folder] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)


def _file_tree(blocks: list[Block]) -> _Folder:
    root = _Folder()
    for block in blocks:
        parts = _parts(block.label)
        if not parts:
            continue
        folder = root
        for part in parts[:-1]:
            folder = folder.folders.setdefault(part, _Folder())
        folder.files.add(f"{parts[-1]}.md")
    return root


def _render_files(folder: _Folder, prefix: str, lines: list[str]) -> None:
    """Folders first, then files, each sorted, drawn as the ``tree`` command draws them."""
    entries = [*((name, folder.folders[name]) for name in sorted(folder.folders)),
               *((name, None) for name in sorted(folder.files))]
    for index, (name, sub) in enumerate(entries):
        last = index == len(entries) - 1
        lines.append(f"{prefix}{'└── ' if last else '├── '}{name}{'' if sub is None else '/'}")
        if sub is not None:
            _render_files(sub, prefix + ("    " if last else "│   "), lines)


def _parts(label: str) -> list[str]:
    return [part for part in label.split("/") if part]
