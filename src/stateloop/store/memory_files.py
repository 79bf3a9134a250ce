"""Memory blocks as files: one Markdown file per block, at a path made from the label
(``human`` is ``human.md``, ``system/persona`` is ``system/persona.md``, ``skills/NAME`` is
``skills/NAME/SKILL.md``), in one of two layouts, chosen by the blocks:

- Letta's (``block_markdown.py``): YAML frontmatter with ``description`` always,
  ``read_only`` and ``metadata`` when not the default; the limit stays out of the file.
- Letta Code's memfs-v2, for an agent with a block ``MEMORY`` (the root index
  ``MEMORY.md``, which Letta Code gives the agents it makes): every ``MEMORY.md`` is its
  value alone, no frontmatter; every other file has exactly ``name`` and ``description``.
  ``read_only``, ``metadata`` and the limit stay in the store (a push cannot change them
  there, and keeps them). ``name`` is the file's name title-cased (``user-name.md`` is
  "User Name"), as Letta Code makes it, or the one a push gave the file, which the
  repository keeps; a block without a description gets ``NO_DESCRIPTION``.

Every frontmatter field is on one line (Letta Code's commit hook reads frontmatter line by
line), text in double quotes as JSON writes it where it needs quoting. A skill's file opens
with its ``name`` too, as an agent skill's ``SKILL.md`` does (``name``, ``description``,
then the instructions).

A label segment that could not be a file name in a git tree (empty, ``.``/``..``, a leading
dot, a character outside letters, digits and ``-_. ()+,=@~``) is written as ``%`` and its
UTF-8 bytes in hex, so every label has a path and every path one label.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
import yaml

from stateloop.storable import check_value

MAX_FRONTMATTER = 64 * 1024  # bytes of YAML a pushed file may open with
_SAFE_SEGMENT = re.compile(r"[A-Za-z0-9_\-()+,=@~][A-Za-z0-9_\-. ()+,=@~]*\Z")
_OPEN, _CLOSE = "---\n", "\n---\n"
_LABEL_PUNCTUATION = str.maketrans("", "", "_-/.")
INDEX = "MEMORY"  # the label of Letta Code's root index, MEMORY.md
NO_DESCRIPTION = "(no description)"  # a memfs-v2 file's description when the block has none
# What YAML cannot carry raw in a double-quoted scalar (not printable, or a line break in
# YAML 1.1), written as a \\u escape, which JSON and YAML read alike.
_UNSAFE = re.compile("[\\x7f-\\x9f\\u2028\\u2029\\ud800-\\udfff\\ufeff\\ufffe\\uffff]")


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
    name: str | None = None  # the file's own name (memfs-v2; a skill's is its folder)
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


def is_index(path: str) -> bool:
    """Whether a file is a memfs-v2 index (``MEMORY.md``, at the root or in a folder)."""
    return path == "MEMORY.md" or path.endswith("/MEMORY.md")


def indexed(labels: Iterable[str]) -> bool:
    """Whether blocks with these labels are in Letta Code's memfs-v2 layout (one is the
    root index ``MEMORY``)."""
    return INDEX in labels


@functools.lru_cache(maxsize=4096)
def default_name(path: str) -> str:
    """The ``name`` Letta Code gives a memory file: its file name's words title-cased
    (``user-name.md`` is "User Name")."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    words = [word for word in re.split(r"[-_]+", stem) if word]
    return " ".join(word[:1].upper() + word[1:] for word in words) or "Memory"


def _quoted(text: str) -> str:
    """Text as a one-line double-quoted scalar that YAML and JSON both read back."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False))


def _line(key: str, value: Any, *, quote: bool) -> str:
    """``key: value`` on one line: YAML's plain form when it has one (and ``quote`` is off),
    else quoted."""
    if isinstance(value, str) and (quote or not value.isprintable()):
        return f"{key}: {_quoted(value)}"
    dumped = yaml.safe_dump({key: value}, width=float("inf"), allow_unicode=True)
    if dumped.count("\n") == 1:
        return dumped[:-1]
    return f"{key}: {_quoted(value)}"


@functools.lru_cache(maxsize=4096)
def _frontmatter(description: str | None, read_only: bool, metadata_json: bytes,
                 name: str | None, v2: bool) -> str:
    if v2:
        text = (f"{_line('name', name, quote=True)}\n"
                f"{_line('description', description, quote=True)}")
        return f"{_OPEN}{text}{_CLOSE}"
    lines = [] if name is None else [_line("name", name, quote=False)]
    lines.append(_line("description", description, quote=False))
    if read_only:
        lines.append("read_only: true")
    metadata = orjson.loads(metadata_json)
    if metadata:
        lines.append(yaml.safe_dump({"metadata": metadata}, default_flow_style=False,
                                    width=float("inf"), allow_unicode=True).rstrip("\n"))
    return _OPEN + "\n".join(lines) + _CLOSE


def render(label: str, value: str, description: str | None, read_only: bool,
           metadata: dict[str, Any] | None, *, v2: bool = False, name: str | None = None
           ) -> str:
    """A block as its Markdown file: in Letta's layout (Letta's ``serialize_block``), or
    with ``v2`` in Letta Code's memfs-v2 layout; ``name`` is the file's, if it has its own.
    A skill's opens with its ``name`` (its folder's) in either."""
    path = path_of(label)
    skill = skill_name(label)
    if skill is not None:
        return _frontmatter(description, bool(read_only), b"{}", skill, False) + value
    if v2:
        if is_index(path):
            return value
        described = description if description and description.strip() else NO_DESCRIPTION
        return _frontmatter(described, False, b"{}", name or default_name(path), True) + value
    meta = orjson.dumps(metadata or {}, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return _frontmatter(description, bool(read_only), meta, name, False) + value


def parse(path: str, text: str, *, v2: bool = False) -> BlockFile:
    """A block's fields from its file; a file without frontmatter is all value (as in
    Letta), and so is every ``MEMORY.md`` with ``v2`` (Letta Code's indexes have none).
    Frontmatter that does not parse, or holds a field of the wrong type, raises
    ``MemoryFileError`` naming the path. Either layout's fields are read in either, so a
    repository can move from one to the other in a push."""
    if (v2 and is_index(path)) or not text.startswith(_OPEN):
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
    unknown = set(front) - {"name", "description", "read_only", "metadata", "limit"}
    if unknown:
        raise MemoryFileError(f"{path}: unknown frontmatter fields {sorted(map(str, unknown))}")
    name = front.get("name")
    if skill is not None and "name" in front and name != skill:
        raise MemoryFileError(f"{path}: name must be the skill's folder name {skill!r}, "
                              f"not {name!r}")
    if "name" in front and (not isinstance(name, str) or not name.strip()):
        raise MemoryFileError(f"{path}: name must be text, not empty")
    said = set(front) - {"name"}
    if front.get("description") == NO_DESCRIPTION:  # what a block without one is given
        said.discard("description")
        front["description"] = None
    found = BlockFile(value=body, name=name, said=said)
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
    problem = check_value({"value": found.value, "name": found.name,
                           "description": found.description,
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
