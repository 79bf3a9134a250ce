"""Agent skills: ``open_skill``, the tool that loads a skill listed in ``<available_skills>``
(a block ``skills/NAME``, the file ``skills/NAME/SKILL.md`` of the memory repository) into
the context whole, as the call's result. The prompt lists only each skill's name and
description (memory/git_blocks.py); its instructions come into the context when the agent
decides it needs them, as Anthropic's agent skills and Letta's memory directory have it."""

from __future__ import annotations

from ..store.memory_files import skill_name
from ..tools.base import ToolContext

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
