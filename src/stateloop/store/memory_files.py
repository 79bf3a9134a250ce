"""Memory blocks as files, in Letta's memory-repository format: one Markdown file per block
with YAML frontmatter (``description`` always, ``read_only`` and ``metadata`` when not the
default; the limit stays out of the file), at a path made from the label (``human`` is
``human.md``, ``system/persona`` is ``system/persona.md``, ``skills/NAME`` is
``skills/NAME/SKILL.md``). A skill's file opens with its ``name`` too, as an agent skill's
``SKILL.md`` does (``name``, ``description``, then the instructions).

A label segment that could not be a file name in a git tree (empty, ``.``/``..``, a leading
dot, a character outside letters, digits and ``-_. ()+,=@~``) is written as ``%`` and its
UTF-8 bytes in hex, so every label has a path and every path one label.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import orjson
import yaml

from stateloop.storable import check_value

MAX_FRONTMATTER = 64 * 1024  # bytes of YAML a pushed file may open with
_SAFE_SEGMENT = re.compile(r"[A-Za-z0-9_\-()+,=@~][A-Za-z0-9_\-. ()+,=@~]*\Z")
_OPEN, _CLOSE = "---\n", "\n---\n"
_LABEL_PUNCTUATION = str.maketrans("", "", "_-/.")


class MemoryFileError(ValueError):
    """A file that is not a valid memory block; the message names the path and the fault."""


@dataclass(slots=True)
class BlockFile:
    """A block's fields as a file holds them (None: the file does not say)."""

    value: str
    description: str | None = None
    read_only: bool | None = None
    metadata: dict[str, Any] | None = None
    limit: int | None = None
    said: set[str] = field(default_factory=set)  # the frontmatter keys the file has


def _segment_path(segment: str) -> str:
    if _SAFE_SEGMENT.match(segment) and not segment.endswith("."):
        return segment
    return "%" + segment.encode().hex()


def _segment_label(segment: str) -> str:
    if not segment.startswith("%"):
        return segment
    try:
        return bytes.fromhex(segment[1:]).decode()
    except ValueError as exc:
        raise MemoryFileError(f"{segment!r} is not an encoded label segment") from exc


def path_of(label: str) -> str:
    """The file a block with this label is written to."""
    parts = label.split("/")
    if len(parts) == 2 and parts[0] == "skills" and parts[1]:
        return f"skills/{_segment_path(parts[1])}/SKILL.md"
    return "/".join(_segment_path(part) for part in parts) + ".md"


def skill_name(label: str) -> str | None:
    """The skill a block is (``skills/pdf`` is the skill ``pdf``), or None."""
    parts = label.split("/")
    return parts[1] if len(parts) == 2 and parts[0] == "skills" and parts[1] else None


def label_of(path: str) -> str | None:
    """The label of the block a file holds, or None for a file that is not a block (not
    Markdown, or under ``skills/`` but not a skill's ``SKILL.md``), as Letta maps them."""
    if not path.endswith(".md"):
        return None
    parts = path.split("/")
    if parts[0] == "skills":
        if len(parts) == 3 and parts[1] and parts[2] == "SKILL.md":
            return f"skills/{_segment_label(parts[1])}"
        return None
    parts[-1] = parts[-1][:-3]
    return "/".join(_segment_label(part) for part in parts)


def label_problem(label: str) -> str | None:
    """Why a block may not have this label, or None when it may. A label is a path in the
    memory repository (``system/persona``, ``skills/pdf``): letters, digits and ``_-.``
    in segments joined by ``/``; no empty segment (so no leading, trailing or doubled
    ``/``) and no ``.`` or ``..`` segment, so no label reaches outside its folder. Every way
    a label comes in (``memory.blocks.Block``, REST, Agent Files, a push) asks this."""
    if not label:
        return "a block label must not be empty"
    parts = label.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return (f"block label {label!r} is not a plain path: no leading, trailing or doubled "
                "'/', and no '.' or '..' segment")
    if not label.translate(_LABEL_PUNCTUATION).isalnum():
        return (f"block label {label!r} must be letters, digits, '_', '-', '.' and '/' "
                "(no spaces, backslashes or control characters)")
    if parts[0] == "skills" and len(parts) > 2:
        return (f"block label {label!r}: a label under 'skills/' names one skill "
                "('skills/NAME', the file skills/NAME/SKILL.md)")
    return None


@functools.lru_cache(maxsize=4096)
def _frontmatter(description: str | None, read_only: bool, metadata_json: bytes,
                 name: str | None) -> str:
    front: dict[str, Any] = {} if name is None else {"name": name}
    front["description"] = description
    if read_only:
        front["read_only"] = True
    metadata = orjson.loads(metadata_json)
    if metadata:
        front["metadata"] = metadata
    text = yaml.safe_dump(front, default_flow_style=False, sort_keys=False, allow_unicode=True)
    return f"{_OPEN}{text.rstrip(chr(10))}{_CLOSE}"


def render(value: str, description: str | None, read_only: bool,
           metadata: dict[str, Any] | None, *, skill: str | None = None) -> str:
    """A block as its Markdown file (Letta's ``serialize_block``); a skill's (``skill``: its
    name) opens with ``name`` as an agent skill's ``SKILL.md`` does."""
    meta = orjson.dumps(metadata or {}, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return _frontmatter(description, bool(read_only), meta, skill) + value


def parse(path: str, text: str) -> BlockFile:
    """A block's fields from its file; a file without frontmatter is all value (as in
    Letta). Frontmatter that does not parse, or holds a field of the wrong type, raises
    ``MemoryFileError`` naming the path."""
    if not text.startswith(_OPEN):
        return BlockFile(value=text)
    end = text.find(_CLOSE, len(_OPEN) - 1)
    if end == -1:
        return BlockFile(value=text)
    head, body = text[len(_OPEN):end], text[end + len(_CLOSE):]
    if len(head.encode()) > MAX_FRONTMATTER:
        raise MemoryFileError(f"{path}: frontmatter over {MAX_FRONTMATTER} bytes")
    front = _load_yaml(path, head)
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise MemoryFileError(f"{path}: frontmatter is not a mapping of fields")
    label = label_of(path)
    skill = None if label is None else skill_name(label)
    known = {"description", "read_only", "metadata", "limit"} | ({"name"} if skill else set())
    unknown = set(front) - known
    if unknown:
        raise MemoryFileError(f"{path}: unknown frontmatter fields {sorted(map(str, unknown))}")
    if "name" in front and front["name"] != skill:
        raise MemoryFileError(f"{path}: name must be the skill's folder name {skill!r}, "
                              f"not {front['name']!r}")
    found = BlockFile(value=body, said=set(front) - {"name"})
    description = front.get("description")
    if description is not None and not isinstance(description, str):
        raise MemoryFileError(f"{path}: description must be text")
    found.description = description
    if "read_only" in front:
        if not isinstance(front["read_only"], bool):
            raise MemoryFileError(f"{path}: read_only must be true or false")
        found.read_only = front["read_only"]
    if "metadata" in front:
        metadata = front["metadata"]
        if metadata is not None and not isinstance(metadata, dict):
            raise MemoryFileError(f"{path}: metadata must be a mapping")
        try:
            orjson.dumps(metadata)
        except TypeError as exc:
            raise MemoryFileError(f"{path}: metadata is not JSON: {exc}") from exc
        found.metadata = metadata or {}
    if "limit" in front:
        limit = front["limit"]
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise MemoryFileError(f"{path}: limit must be a positive integer")
        found.limit = limit
    # The same rules as every other way in (stateloop.storable): finite numbers, 64-bit
    # integers, no lone surrogates, bounded nesting.
    problem = check_value({"value": found.value, "description": found.description,
                           "metadata": found.metadata, "limit": found.limit})
    if problem is not None:
        raise MemoryFileError(f"{path}: {problem.where}: {problem.msg}")
    return found


def _load_yaml(path: str, head: str) -> Any:
    try:
        # An alias repeats a node without its size showing in the text (a YAML bomb).
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(head,
                                                                        Loader=yaml.SafeLoader)):
            raise MemoryFileError(f"{path}: frontmatter may not use YAML aliases")
        return yaml.safe_load(head)
    except yaml.YAMLError as exc:
        raise MemoryFileError(f"{path}: frontmatter is not valid YAML: {exc}") from exc
