"""Agent skills: ``open_skill``, the tool that loads a skill listed in ``<available_skills>``
(a block ``skills/NAME``, the file ``skills/NAME/SKILL.md`` of the memory repository) into
the context whole, as the call's result. The prompt lists only each skill's name and
description (memory/git_blocks.py); its instructions come into the context when the agent
decides it needs them, as Anthropic's agent skills and Letta's memory directory have it.

``<available_skills>`` draws the list as Letta's ``compile_available_skills`` does: skills
grouped by the folder they live in, each folder as a tree. A request may add skills its
client holds (Letta's ``client_skills``, which Letta Code sends with every message): they
are listed for that request only, beside the agent's own (which win a shared name), and
the client reads them from their ``location``."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..messages import Message, TextPart
from ..store.memory_files import skill_name
from ..tools.base import ToolContext
from .blocks import Block

_MEMORY_SKILLS = "${MEMORY_DIR}/skills"


@dataclass(frozen=True, slots=True)
class ClientSkill:
    """A skill a client holds: its name, what it is for, and where the client keeps it
    (``/work/.skills/pdf/SKILL.md``)."""

    name: str
    description: str
    location: str


def render_skills(blocks: Sequence[Block], client: Sequence[ClientSkill] = ()) -> str:
    """``<available_skills>``: the agent's skills (``${MEMORY_DIR}/skills/NAME/SKILL.md``)
    and the client's, each with the first line of its description, grouped by folder and
    drawn as trees; "" when there are none."""
    entries: dict[str, tuple[str, str]] = {}  # name -> (description, location)
    for block in blocks:
        if (name := skill_name(block.label)) is not None:
            entries[name] = (block.description or "", f"{_MEMORY_SKILLS}/{name}/SKILL.md")
    for skill in client:
        entries.setdefault(skill.name, (skill.description,
                                        skill.location.strip()
                                        or f"{_MEMORY_SKILLS}/{skill.name}/SKILL.md"))
    if not entries:
        return ""
    grouped: dict[str, list[tuple[str, str]]] = {}
    for name, (description, location) in entries.items():
        root, relative = _root(name, location)
        grouped.setdefault(root, []).append((relative, description.strip().split("\n")[0]
                                             .strip()))
    lines = ["<available_skills>"]
    for index, root in enumerate(sorted(grouped)):
        if index:
            lines.append("")
        lines.append(root)
        tree: dict[str, object] = {}
        for relative, description in sorted(grouped[root]):
            parts = [part for part in relative.split("/") if part]
            if not parts:
                continue
            node = tree
            for part in parts[:-1]:
                child = node.setdefault(part, {})
                node = child if isinstance(child, dict) else {}
            node[parts[-1]] = description
        _draw(tree, "", lines)
    lines.append("</available_skills>")
    return "\n".join(lines)


def _root(name: str, location: str) -> tuple[str, str]:
    """The folder a skill is listed under and its path there: the folder holding the
    skill's own folder when that is named as the skill, else the file's folder."""
    location = location.strip()
    if location.endswith("/SKILL.md"):
        folder = posixpath.dirname(location)
        if posixpath.basename(folder) == name.split("/")[-1]:
            root = posixpath.dirname(folder)
            return root, posixpath.relpath(location, root) if root else location
    return posixpath.dirname(location), posixpath.basename(location)


def _draw(node: dict[str, object], prefix: str, lines: list[str]) -> None:
    """Folders first, then files, each sorted, drawn as the ``tree`` command draws them."""
    entries = sorted((name, True) for name, v in node.items() if isinstance(v, dict))
    entries += sorted((name, False) for name, v in node.items() if not isinstance(v, dict))
    for index, (name, folder) in enumerate(entries):
        last = index == len(entries) - 1
        if folder:
            lines.append(f"{prefix}{'└── ' if last else '├── '}{name}/")
            child = node[name]
            assert isinstance(child, dict)
            _draw(child, prefix + ("    " if last else "│   "), lines)
        else:
            description = str(node[name])
            lines.append(f"{prefix}{'└── ' if last else '├── '}{name}"
                         + (f" ({description})" if description else ""))


def with_client_skills(build: Callable[[list[Message]], list[Message]],
                       blocks: Callable[[], Sequence[Block]], client: Sequence[ClientSkill]
                       ) -> Callable[[list[Message]], list[Message]]:
    """A run's request builder whose system message lists the client's skills beside the
    agent's (in place of the agent's own list, else at its end); the stored prompt is not
    changed."""

    def built(transcript: list[Message]) -> list[Message]:
        messages = build(transcript)
        if not messages or messages[0].role != "system":
            return messages
        now = list(blocks())
        text, own = messages[0].text, render_skills(now)
        merged = render_skills(now, client)
        at = text.rfind(own) if own else -1
        if at >= 0:
            text = text[:at] + merged + text[at + len(own):]
        else:
            text = f"{text.rstrip()}\n\n{merged}"
        return [replace(messages[0], content=[TextPart(text)]), *messages[1:]]

    return built if client else build

_PREFIXES = ("${MEMORY_DIR}/", "$MEMORY_DIR/", "/memories/", "/", "skills/")


def _wanted(name: str) -> str:
    """The skill a name or path names: ``pdf``, ``skills/pdf``,
    ``${MEMORY_DIR}/skills/pdf/SKILL.md`` all name ``pdf``."""
    wanted = name.strip()
    for prefix in _PREFIXES:
        wanted = wanted.removeprefix(prefix)
    return wanted.removesuffix("/SKILL.md").removesuffix(".md")


async def open_skill(ctx: ToolContext, name: str) -> str:
    """Open a skill listed in <available_skills>: its full instructions (its SKILL.md) are
    returned. Open a skill before a task its description covers, then follow it.

    Args:
        name: The skill's name as listed (its folder under skills/, e.g. "pdf").
    """
    wanted = _wanted(name)
    skills = {skill: block for block in ctx.agent.blocks
              if (skill := skill_name(block.label)) is not None}
    block = skills.get(wanted)
    if block is None:
        known = ", ".join(sorted(skills)) or "none"
        raise ValueError(f"Error: no skill named {wanted!r}; available skills: {known}")
    return block.value


SKILL_TOOLS = (open_skill,)
