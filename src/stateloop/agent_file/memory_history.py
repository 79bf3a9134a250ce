"""An agent's memory history in an Agent File, when an export is asked for it: under the
file's own key ``stateloop_memory_history`` (Letta's ``AgentFileSchema`` ignores keys it does
not declare at the top), one entry per agent of the file — its head, its commits oldest
first (sha, author, time) and every git object of its repository (sha, type, base64 of the
raw data). The objects are git's own, so an import keeps every commit's sha.

Reading one checks it whole before anything is stored, each fault an ``AgentFileError``
naming the field: a bounded number and size of objects and of files to check, each
object's data hashing to its sha, commits that are commits whose parents come before them,
the last one the head, every tree complete with plain names, and every block file parsing
with a legal label (so any commit can be read, diffed and reverted to).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dulwich.objects import Blob, Commit, ShaFile

from ..store import memory_files
from ..store.memory_push import PushRefused, block_label, tree_files
from ..store.memory_repo import Author, NewCommit
from .reading import AgentFileError

HISTORY_KEY = "stateloop_memory_history"
MAX_OBJECTS = 100_000  # objects of one agent's history in a file
MAX_OBJECT_BYTES = 1024 * 1024  # one object's raw data, as a push's object is bounded
MAX_FILES_CHECKED = 2_000_000  # files of every commit's tree, summed: the work a check costs
_TYPES = {1: "commit", 2: "tree", 3: "blob"}
_AUTHOR_TYPES = ("agent", "user", "system")
_MAX_TEXT = 1000


@dataclass(slots=True)
class History:
    """One agent's history as the store will hold it: its commits, oldest first, the first
    carrying every object."""

    commits: list[NewCommit]


async def exported_history(db: Any, agent_id: str, file_id: str) -> dict[str, Any]:
    """The agent's history as its entry under ``HISTORY_KEY``."""
    head, commits, found = await db.memory_export(agent_id)
    return {"agent_id": file_id, "head": head,
            "commits": [{"sha": c["sha"], "author_type": c["author_type"],
                         "author_id": c["author_id"], "author_name": c["author_name"],
                         "timestamp": c["created_at"]} for c in commits],
            "objects": [{"sha": sha, "type": kind, "data": base64.b64encode(data).decode()}
                        for sha, kind, data in found]}


def read_histories(entries: Any, agent_ids: set[Any]) -> dict[str, History]:
    """File agent id -> its checked history."""
    if not isinstance(entries, list):
        raise AgentFileError("must be a list", field=HISTORY_KEY)
    found: dict[str, History] = {}
    for index, entry in enumerate(entries):
        where = f"{HISTORY_KEY}.{index}"
        if not isinstance(entry, dict):
            raise AgentFileError("must be an object", field=where)
        agent_id = entry.get("agent_id")
        if not isinstance(agent_id, str) or agent_id not in agent_ids or agent_id in found:
            raise AgentFileError(f"names no agent of the file, or one named before: "
                                 f"{agent_id!r}", field=f"{where}.agent_id")
        found[agent_id] = read_history(entry, where)
    return found


def read_history(entry: Mapping[str, Any], where: str) -> History:
    """One agent's entry, checked whole."""
    objects = _objects(entry.get("objects"), f"{where}.objects")
    rows = entry.get("commits")
    if not isinstance(rows, list) or not rows:
        raise AgentFileError("must be a list of the commits, oldest first",
                             field=f"{where}.commits")
    made: list[NewCommit] = []
    files_of: dict[bytes, dict[str, list[Any]]] = {}  # commit -> its files
    trees: dict[bytes, dict[str, list[Any]]] = {}  # root tree -> its files, read once
    checked = 0
    parsed: dict[str, str] = {}  # blob sha -> the path it parsed as
    for index, row in enumerate(rows):
        here = f"{where}.commits.{index}"
        commit, author, created_at = _commit_row(row, objects, here)
        if any(parent not in files_of for parent in commit.parents):
            raise AgentFileError("a parent of this commit is not listed before it",
                                 field=f"{here}.sha")
        files = trees.get(commit.tree)
        if files is None:
            try:
                files = trees[commit.tree] = tree_files(objects, commit.tree)
            except PushRefused as exc:
                raise AgentFileError(str(exc), field=f"{here}.sha") from None
        checked += len(files)
        if checked > MAX_FILES_CHECKED:
            raise AgentFileError(f"its commits' trees hold over {MAX_FILES_CHECKED} files in "
                                 "all, more than a memory history in an Agent File may",
                                 field=f"{where}.commits")
        _check_blocks(files, objects, parsed, here)
        parent = commit.parents[0] if commit.parents else None
        before = files_of[parent] if parent else {}
        changes = {p: [before.get(p, [0, None])[1], files.get(p, [0, None])[1]]
                   for p in before.keys() | files.keys() if before.get(p) != files.get(p)}
        made.append(NewCommit("", parent.decode() if parent else None, commit, [], files,
                              changes, author,
                              commit.message.decode(errors="replace").rstrip("\n"),
                              created_at))
        files_of[commit.id] = files
    if entry.get("head") != made[-1].commit.id.decode():
        raise AgentFileError("must be the last commit listed", field=f"{where}.head")
    made[0].made = list(objects.values())
    return History(made)


def _objects(items: Any, where: str) -> dict[bytes, ShaFile]:
    if not isinstance(items, list):
        raise AgentFileError("must be a list", field=where)
    if len(items) > MAX_OBJECTS:
        raise AgentFileError(f"{len(items)} objects, over the {MAX_OBJECTS} a memory history "
                             "in an Agent File may have", field=where)
    found: dict[bytes, ShaFile] = {}
    for index, item in enumerate(items):
        here = f"{where}.{index}"
        if not isinstance(item, dict) or not isinstance(item.get("data"), str) \
                or item.get("type") not in _TYPES or not isinstance(item.get("sha"), str):
            raise AgentFileError("an object is {sha, type (1 commit, 2 tree, 3 blob), data "
                                 "(base64)}", field=here)
        if len(item["data"]) > (MAX_OBJECT_BYTES + 2) // 3 * 4:
            raise AgentFileError(f"over {MAX_OBJECT_BYTES} bytes", field=f"{here}.data")
        try:
            raw = base64.b64decode(item["data"], validate=True)
            obj = ShaFile.from_raw_string(item["type"], raw)
            obj.check()
        except Exception as exc:  # base64's and dulwich's faults are of many kinds
            raise AgentFileError(f"not a git {_TYPES[item['type']]}: {exc}",
                                 field=f"{here}.data") from None
        if obj.id.decode() != item["sha"]:
            raise AgentFileError(f"its data hashes to {obj.id.decode()}, not {item['sha']}",
                                 field=f"{here}.sha")
        found[obj.id] = obj
    return found


def _commit_row(row: Any, objects: Mapping[bytes, ShaFile], here: str
                ) -> tuple[Commit, Author, float]:
    if not isinstance(row, dict):
        raise AgentFileError("must be an object", field=here)
    sha = row.get("sha")
    commit = objects.get(sha.encode()) if isinstance(sha, str) else None
    if not isinstance(commit, Commit):
        raise AgentFileError(f"{sha!r} is not a commit among the objects", field=f"{here}.sha")
    kind, author_id, name = row.get("author_type"), row.get("author_id"), row.get("author_name")
    if kind not in _AUTHOR_TYPES:
        raise AgentFileError(f"must be one of {', '.join(_AUTHOR_TYPES)}",
                             field=f"{here}.author_type")
    for key, value in (("author_id", author_id), ("author_name", name or "")):
        if not isinstance(value, str) or len(value) > _MAX_TEXT:
            raise AgentFileError(f"must be text of at most {_MAX_TEXT} characters",
                                 field=f"{here}.{key}")
    timestamp = row.get("timestamp")
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float) \
            or not math.isfinite(timestamp):
        raise AgentFileError("must be a time in seconds", field=f"{here}.timestamp")
    return commit, Author(str(kind), str(author_id), name), float(timestamp)


def _check_blocks(files: Mapping[str, list[Any]], objects: Mapping[bytes, ShaFile],
                  parsed: dict[str, str], here: str) -> None:
    """Every block file of a commit parses, under a legal label (each blob once per path)."""
    for path, (_, sha) in files.items():
        if parsed.get(sha) == path:
            continue
        try:
            if block_label(path) is None:
                continue
            blob = objects[sha.encode()]
            assert isinstance(blob, Blob)
            memory_files.parse(path, blob.as_raw_string().decode(), v2="MEMORY.md" in files)
        except (memory_files.MemoryFileError, UnicodeDecodeError) as exc:
            raise AgentFileError(str(exc), field=f"{here}.sha") from None
        parsed[sha] = path
