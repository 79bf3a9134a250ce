"""An Agent File's ``skills`` (Letta's ``SkillSchema``: a ``name``, and ``files`` holding a
``SKILL.md`` or a ``source_url``), read into blocks ``skills/NAME`` — the file
``skills/NAME/SKILL.md`` of each agent's memory: its frontmatter's ``description`` and its
instructions. A skill that cannot be a block (a name that is no plain folder name, a
``SKILL.md`` that does not parse or is over a block's limit, only a ``source_url``: stateloop
fetches nothing) is left out and named; so are a skill's other files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..memory.blocks import Block
from ..store.memory_files import MemoryFileError, label_problem, parse
from .reading import AgentFileError, LeftOut

SKILL_FILE = "SKILL.md"


@dataclass(slots=True)
class Skill:
    """A skill of the file as a block will hold it."""

    name: str
    description: str | None
    instructions: str


def letta_label(label: str) -> str:
    """A label as Letta maps it to its file: its older skill label ``skills/NAME/SKILL``
    (the file ``skills/NAME/SKILL.md``) is the skill ``skills/NAME``."""
    parts = label.split("/")
    if len(parts) == 3 and parts[0] == "skills" and parts[1] and parts[2] == "SKILL":
        return f"skills/{parts[1]}"
    return label


def skill_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a skill (a folder under ``skills/``), or None."""
    if not isinstance(name, str) or not name:
        return "a skill's name is a non-empty string"
    if "/" in name:
        return f"skill name {name!r} must be one folder name, without '/'"
    return label_problem(f"skills/{name}")


def read_skills(entries: list[dict[str, Any]], left_out: LeftOut) -> list[Skill]:
    """The skills the file's agents get, in the file's order."""
    found: dict[str, Skill] = {}
    for index, entry in enumerate(entries):
        where = f"skills.{index}"
        name = entry.get("name")
        item = f"skill {name!r}" if isinstance(name, str) else where
        try:
            skill = _skill(entry, where, name)
        except AgentFileError as exc:
            left_out.skip(item, exc)
            continue
        if skill.name in found:
            left_out.skip(item, AgentFileError("a second skill of that name", field=where))
            continue
        found[skill.name] = skill
        files = entry.get("files") or {}
        others = sorted(str(path) for path in files if path != SKILL_FILE)
        if others:
            left_out.notes.append(f"{item}: its files other than {SKILL_FILE} left out "
                                  f"({', '.join(others[:5])}{', ...' if len(others) > 5 else ''})")
    return list(found.values())


def _skill(entry: dict[str, Any], where: str, name: Any) -> Skill:
    problem = skill_problem(name)
    if problem is not None:
        raise AgentFileError(problem, field=f"{where}.name")
    files = entry.get("files")
    if files is not None and not isinstance(files, dict):
        raise AgentFileError("must be an object of path -> text", field=f"{where}.files")
    text = (files or {}).get(SKILL_FILE)
    if text is None:
        source = entry.get("source_url")
        raise AgentFileError(f"no {SKILL_FILE} in its files"
                             + (f" (stateloop fetches no skill from {source!r})"
                                if isinstance(source, str) else ""), field=f"{where}.files")
    if not isinstance(text, str):
        raise AgentFileError("must be text", field=f"{where}.files.{SKILL_FILE}")
    try:
        parsed = parse(f"skills/{name}/{SKILL_FILE}", text)
        Block(f"skills/{name}", parsed.value, parsed.description)  # a block's rules and limit
    except (MemoryFileError, ValueError) as exc:
        raise AgentFileError(str(exc), field=f"{where}.files.{SKILL_FILE}") from None
    return Skill(str(name), parsed.description, parsed.value)
