"""An Agent File's bytes as a checked dict: size, JSON (double-encoded too, as Letta's own
importer takes it), values the store can hold (``storable``: the rules every request body
meets), and which version of the format it is.

Letta wrote two formats. The current one is a dict with ``agents``, ``blocks``, ``tools``,
``groups``... and ``metadata.revision_id``. The legacy single-agent format (``version``
``0.6.x`` to ``0.10.x`` with ``core_memory`` and inline tools), which Letta's own importer
no longer takes, is read through ``legacy.py``; any other version is refused naming it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..storable import Problem, check_json, check_value
from .errors import AgentFileError
from .legacy import is_legacy, upgrade

MAX_FILE_BYTES = 64 * 1024 * 1024  # an Agent File this large is refused before it is parsed
_LISTS = ("agents", "groups", "blocks", "files", "sources", "tools", "mcp_servers")


Source = str | os.PathLike[str] | bytes | dict[str, Any]


class LeftOut:
    """What an import leaves out of a file, each item by name with the reason. ``strict``
    refuses the file at the first such item instead."""

    def __init__(self, *, strict: bool) -> None:
        self.strict = strict
        self.notes: list[str] = []

    def skip(self, item: str, error: AgentFileError) -> None:
        """Leave ``item`` (``tool 'x'``, ``blocks.3``) out for the reason ``error`` gives,
        or, when strict, raise it naming the item."""
        if self.strict:
            raise AgentFileError(f"{item}: {error.reason}", field=error.field)
        self.notes.append(f"{item} left out: {error.reason}")


def read_agent_file(source: Source, *, max_bytes: int = MAX_FILE_BYTES) -> dict[str, Any]:
    """The file as a dict in the current format, or an ``AgentFileError``. ``source`` is a
    path, the file's bytes, or an already parsed dict."""
    if isinstance(source, dict):
        data: Any = source
        refuse(check_value(data))
    else:
        raw = _raw(source, max_bytes)
        refuse(check_json(raw))
        try:
            data = json.loads(raw)
            if isinstance(data, str):  # double-encoded, as some exports are
                data = json.loads(data)
                refuse(check_value(data))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise AgentFileError(f"not valid JSON (truncated or corrupted?): {exc}") from None
    if not isinstance(data, dict):
        raise AgentFileError(f"an Agent File is a JSON object, not {type(data).__name__}")
    if is_legacy(data):
        data = upgrade(data)
    check_version(data)
    for key in _LISTS:
        value = data.get(key, [])
        if not isinstance(value, list):
            raise AgentFileError(f"must be a list, not {type(value).__name__}", field=key)
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise AgentFileError(f"must be an object, not {type(item).__name__}",
                                     field=f"{key}.{index}")
    if not data["agents"]:
        raise AgentFileError("the file holds no agents", field="agents")
    return data


def refuse(problem: Problem | None) -> None:
    """An ``AgentFileError`` naming where ``problem`` is, when there is one."""
    if problem is not None:
        raise AgentFileError(problem.msg, field=problem.where or "file")


def check_version(data: dict[str, Any]) -> None:
    """Refuse the formats this reader does not know, naming their version."""
    if "agents" in data:
        return
    version = data.get("version")
    if version is not None:
        raise AgentFileError(f"unknown Agent File version {version!r}: expected the current "
                             "format (an 'agents' list) or Letta's legacy single-agent "
                             "format (with 'core_memory')")
    raise AgentFileError("not an Agent File: expected a JSON object with an 'agents' list")


def _raw(source: str | os.PathLike[str] | bytes, max_bytes: int) -> bytes:
    if isinstance(source, bytes):
        data = source
    else:
        path = Path(source)
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise AgentFileError(f"cannot read {str(path)!r}: {exc.strerror}") from None
        if size > max_bytes:
            raise AgentFileError(too_large(size, max_bytes))
        data = path.read_bytes()
    if len(data) > max_bytes:
        raise AgentFileError(too_large(len(data), max_bytes))
    return data


def too_large(size: int, max_bytes: int) -> str:
    return (f"the file is {size / 1_048_576:.1f} MB, over the {max_bytes / 1_048_576:.0f} MB "
            "an Agent File may have")
