"""Each agent's memory repository, written inside the transaction that changes its blocks:
``commit_agents`` turns the agents' blocks as they now stand into one git commit each
(Letta's files, memory_files.py), objects made by dulwich and kept in the store's tables
(schema ``memory_*``), so every process of a fleet serves the same history.

The head row holds the files of the head's tree (path -> mode and blob sha), so a commit
reads one row and writes only what is new: the changed blobs, the trees above them, the
commit, its row in ``memory_commits`` (with the files it changed) and the head. The head
row is locked first (``FOR UPDATE`` on PostgreSQL; SQLite has one writer), so two
transactions changing one agent's blocks commit one after the other, each on the other's.

A block shared by several agents is a file in each agent's repository (as in Letta, where
the repository is the agent's), so a change to it is a commit in every one of them.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import orjson
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tree
from sqlalchemy import Connection, Row, bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite

from stateloop.store import memory_files, schema
from stateloop.store.fastpath import FastStatement

heads, objects = schema.memory_heads, schema.memory_objects
commits = schema.memory_commits
b, ba = schema.blocks, schema.blocks_agents

BRANCH = b"refs/heads/main"
FILE_MODE = 0o100644
DIR_MODE = 0o040000


@dataclass(frozen=True, slots=True)
class Author:
    """Who made a change: ``kind`` is Letta's author type (``agent``, ``user``, ``system``),
    ``id`` the agent's or caller's id, ``name`` what a reader sees (a tool, a key's name)."""

    kind: str
    id: str
    name: str | None = None

    def signature(self) -> bytes:
        """The author line of a git commit: ``name <kind:id>``."""
        name = _clean(self.name or self.id)
        return f"{name} <{_clean(self.kind)}:{_clean(self.id)}>".encode()


SYSTEM = Author("system", "stateloop", "stateloop")
# Who is changing memory in this context (an API caller, a memory agent...); the store's
# block writes read it when they are called, and SYSTEM stands in when nobody set it.
changed_by: ContextVar[Author | None] = ContextVar("memory_author", default=None)


def current_author() -> Author:
    """The author set for this context, else ``SYSTEM``."""
    return changed_by.get() or SYSTEM


def _clean(text: str) -> str:
    return "".join(ch for ch in text if ch not in "<>\n\r\0").strip() or "-"


@dataclass(slots=True)
class NewCommit:
    """A commit about to be stored: its objects and the row describing it."""

    agent_id: str
    parent: str | None
    commit: Commit
    made: list[ShaFile]  # the objects it adds (trees, blobs and the commit)
    files: dict[str, list[Any]]  # path -> [mode, blob sha] of its tree
    changes: dict[str, list[str | None]]  # path -> [old blob sha, new blob sha]
    author: Author
    message: str
    created_at: float | None = None  # when it was made, if not now (an imported history)


def block_files(blocks: Sequence[Row[Any] | Any], names: Mapping[str, str] | None = None
                ) -> dict[str, str]:
    """Path -> file text of an agent's blocks (rows or records with label, value,
    description, read_only, metadata), in the layout its labels choose; ``names``: path ->
    the name a file keeps (``kept_names``)."""
    v2 = memory_files.indexed(row.label for row in blocks)
    names = names or {}
    found = {}
    for row in blocks:
        path = memory_files.path_of(row.label)
        found[path] = memory_files.render(row.label, row.value, row.description,
                                          bool(row.read_only), _json(row.metadata), v2=v2,
                                          name=names.get(path))
    return found


# Blob sha -> the name its file gives itself (None: none, or its default). Content
# addressed, so true in every repository and process; bounded by clearing when full.
_NAMES: dict[str, str | None] = {}
_MAX_NAMES = 65536
_OBJECT = FastStatement(select(objects.c.data).where(objects.c.agent_id == bindparam("agent"))
                        .where(objects.c.sha == bindparam("sha")))


def learn_name(sha: str, path: str, name: str | None) -> None:
    """Remember the name a file (blob ``sha`` at ``path``) gives itself."""
    if len(_NAMES) >= _MAX_NAMES:
        _NAMES.clear()
    _NAMES[sha] = None if name is None or name == memory_files.default_name(path) else name


@functools.lru_cache(maxsize=4096)
def _nameable(path: str) -> bool:
    """Whether the file is a block's that may name itself (a skill's name is its folder)."""
    label = memory_files.label_of(path)
    return label is not None and memory_files.skill_name(label) is None


def kept_names(conn: Connection, agent_id: str, files: Mapping[str, list[Any]]
               ) -> dict[str, str]:
    """Path -> the name a file of ``files`` (path -> [mode, blob sha]) gives itself where
    that is not its default (a push named it): the name its next version keeps. Skills are
    named by their folder. A blob not seen by this process is read once."""
    kept = {}
    for path, (_, sha) in files.items():
        if not _nameable(path):
            continue
        if sha not in _NAMES:
            found = _OBJECT.fetch(conn, {"agent": agent_id, "sha": sha})
            name = None
            if found:
                with contextlib.suppress(memory_files.MemoryFileError, UnicodeDecodeError):
                    name = memory_files.parse(path, bytes(found[0][0]).decode()).name
            learn_name(sha, path, name)
        if (name := _NAMES[sha]) is not None:
            kept[path] = name
    return kept


def _json(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def build_commit(agent_id: str, parent: str | None, old: Mapping[str, list[Any]],
                 texts: Mapping[str, str], author: Author, message: str | None,
                 now: float, *, other: Mapping[str, list[Any]] | None = None,
                 names: Mapping[str, str] | None = None) -> NewCommit | None:
    """The commit whose tree holds ``texts`` (path -> text; ``names``: the names their
    files were given, ``kept_names``) and the files that are not blocks: ``other`` (path ->
    [mode, blob sha] of stored blobs), else those of ``old``; None when that is ``old``
    exactly."""
    names = names or {}
    if other is None:
        other = {p: e for p, e in old.items() if memory_files.label_of(p) is None}
    files: dict[str, list[Any]] = dict(other)
    made: list[ShaFile] = []
    known = {entry[1] for entry in old.values()}
    for path, text in texts.items():
        blob = Blob.from_string(text.encode())
        sha = blob.id.decode()
        if sha not in _NAMES:  # what it was rendered with: this step's next commit reads it
            learn_name(sha, path, names.get(path))
        if sha not in known:
            made.append(blob)
            known.add(sha)
        files[path] = [FILE_MODE, sha]
    changes: dict[str, list[str | None]] = {}
    for path in old.keys() | files.keys():
        before, after = old.get(path), files.get(path)
        if before != after:
            changes[path] = [None if before is None else before[1],
                             None if after is None else after[1]]
    if not changes and parent is not None:
        return None
    root = _trees(files, made)
    commit = Commit()
    commit.tree = root
    commit.parents = [ObjectID(parent.encode())] if parent else []
    commit.author = commit.committer = author.signature()
    commit.author_time = commit.commit_time = int(now)
    commit.author_timezone = commit.commit_timezone = 0
    text = message or summary(changes)
    commit.message = text.encode() + (b"" if text.endswith("\n") else b"\n")
    made.append(commit)
    return NewCommit(agent_id, parent, commit, made, dict(sorted(files.items())), changes,
                     author, text.rstrip("\n"))


def summary(changes: Mapping[str, Sequence[str | None]]) -> str:
    """A commit message naming what changed: ``Update human, system/persona``."""
    verbs: dict[str, list[str]] = {}
    for path in sorted(changes):
        before, after = changes[path]
        verb = "Add" if before is None else "Delete" if after is None else "Update"
        verbs.setdefault(verb, []).append(memory_files.label_of(path) or path)
    return "; ".join(f"{verb} {', '.join(names)}" for verb, names in verbs.items()) or "Commit"


def _trees(files: Mapping[str, list[Any]], made: list[ShaFile]) -> bytes:
    """The root tree's sha for ``files``, appending every tree to ``made``."""
    nested: dict[str, Any] = {}
    for path, entry in files.items():
        *dirs, name = path.split("/")
        node = nested
        for part in dirs:
            node = node.setdefault(part, {})
        node[name] = entry
    return _tree(nested, made)


def _tree(node: Mapping[str, Any], made: list[ShaFile]) -> bytes:
    tree = Tree()
    for name, entry in node.items():
        if isinstance(entry, dict):
            tree.add(name.encode(), DIR_MODE, ObjectID(_tree(entry, made)))
        else:
            tree.add(name.encode(), entry[0], ObjectID(entry[1].encode()))
    made.append(tree)
    return tree.id


def _ignoring(table: Any, json_params: Sequence[str] = ()) -> dict[str, FastStatement]:
    """An insert of whole rows that skips rows whose key is taken, per dialect."""
    values: dict[str, Any] = {col.name: bindparam(col.name) for col in table.columns
              if not (col.primary_key and col.autoincrement is True)}
    return {name: FastStatement(dialect.insert(table).values(values).on_conflict_do_nothing(),
                                json_params)
            for name, dialect in (("sqlite", sqlite), ("postgresql", postgresql))}


# Statements on the DBAPI connection (fastpath.py), so the step path's group commit can run
# them inside its own transaction.
_NEW_HEAD = _ignoring(heads, ["files"])
_NEW_OBJECT = _ignoring(objects)
_LOCK_HEAD = FastStatement(select(heads.c.sha, heads.c.files)
                           .where(heads.c.agent_id == bindparam("agent_id")).with_for_update())
_SET_HEAD = FastStatement(update(heads).where(heads.c.agent_id == bindparam("agent"))
                          .values(sha=bindparam("sha"), files=bindparam("files")), ["files"])
_INSERT_COMMIT = FastStatement.for_insert(commits)
_AGENTS_OF_BLOCK = FastStatement(select(ba.c.agent_id).where(ba.c.block_id == bindparam("block")))
_AGENT_BLOCKS = FastStatement(
    select(ba.c.label, b.c.value, b.c.description, b.c.read_only, b.c.metadata)
    .join(b, b.c.id == ba.c.block_id).where(ba.c.agent_id == bindparam("agent"))
    .order_by(ba.c.position))


@dataclass(slots=True)
class _BlockRow:
    label: str
    value: str
    description: str | None
    read_only: bool
    metadata: Any


def lock_heads(conn: Connection, agent_ids: Sequence[str]) -> dict[str, tuple[str | None,
                                                                            dict[str, Any]]]:
    """The agents' heads (sha and files), each row locked until the transaction ends."""
    dialect = conn.dialect.name
    found: dict[str, tuple[str | None, dict[str, Any]]] = {}
    for agent_id in sorted(agent_ids):  # one order everywhere: no deadlock between two
        head = _LOCK_HEAD.fetch(conn, {"agent_id": agent_id})
        if not head:  # its first commit: a row to lock (another transaction may add it first)
            _NEW_HEAD[dialect].execute(conn, {"agent_id": agent_id, "sha": None, "files": {}})
            head = _LOCK_HEAD.fetch(conn, {"agent_id": agent_id})
        sha, files = head[0]
        found[agent_id] = (sha, _json(files) or {})
    return found


def agent_block_rows(conn: Connection, agent_id: str) -> list[_BlockRow]:
    """An agent's blocks, as the fields its files are made of."""
    return [_BlockRow(*row) for row in _AGENT_BLOCKS.fetch(conn, {"agent": agent_id})]


def store_commits(conn: Connection, made: Sequence[NewCommit], now: float) -> None:
    """Write new commits: their objects, rows, and the heads that now point at them
    (the heads were locked by ``lock_heads``)."""
    if not made:
        return
    _NEW_OBJECT[conn.dialect.name].execute_many(conn, [
        {"agent_id": c.agent_id, "sha": obj.id.decode(), "type": obj.type_num,
         "data": obj.as_raw_string()} for c in made for obj in c.made])
    _INSERT_COMMIT.execute_many(conn, [
        {"agent_id": c.agent_id, "sha": c.commit.id.decode(), "parent_sha": c.parent,
         "author_type": c.author.kind, "author_id": c.author.id,
         "author_name": c.author.name, "message": c.message,
         "created_at": now if c.created_at is None else c.created_at,
         "changes": c.changes} for c in made])
    for c in made:
        _SET_HEAD.execute(conn, {"agent": c.agent_id, "sha": c.commit.id.decode(),
                                 "files": c.files})


def agents_of_blocks(conn: Connection, block_ids: Iterable[str]) -> set[str]:
    """The agents these blocks are attached to."""
    found: set[str] = set()
    for block_id in block_ids:
        found.update(row[0] for row in _AGENTS_OF_BLOCK.fetch(conn, {"block": block_id}))
    return found


def lock_for_blocks(conn: Connection, block_ids: Iterable[str]) -> None:
    """Lock the heads of the agents of these blocks before the blocks are written: every
    writer takes heads first, then block rows, so two never wait on each other in a cycle.
    SQLite has one writer at a time, so nothing to do there."""
    if conn.dialect.name == "sqlite":
        return
    agents = agents_of_blocks(conn, block_ids)
    if agents:
        lock_heads(conn, sorted(agents))


def commit_agents(conn: Connection, agent_ids: Iterable[str] = (), *,
                  block_ids: Iterable[str] = (), author: Author | None = None,
                  message: str | None = None, now: float | None = None) -> dict[str, str]:
    """Commit the blocks of ``agent_ids`` and of every agent a block in ``block_ids`` is
    attached to, as they stand in this transaction; agent id -> new commit sha (agents
    whose files did not change get none)."""
    wanted = set(agent_ids) | agents_of_blocks(conn, block_ids)
    if not wanted:
        return {}
    found = lock_heads(conn, list(wanted))
    now = time.time() if now is None else now
    who = author or current_author()
    made = []
    for agent, (parent, old) in found.items():
        names = kept_names(conn, agent, old)
        texts = block_files(agent_block_rows(conn, agent), names)
        new = build_commit(agent, parent, old, texts, who, message, now, names=names)
        if new is not None:
            made.append(new)
    store_commits(conn, made, now)
    return {c.agent_id: c.commit.id.decode() for c in made}
