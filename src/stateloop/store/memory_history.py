"""Reading an agent's memory repository (memory_repo.py writes it): its commits, newest
first, all or a file's; the files as of a commit; and reverting the blocks to a commit,
which is itself a new commit."""

from __future__ import annotations

import dataclasses
import difflib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from dulwich.objects import Commit, ShaFile, Tree
from sqlalchemy import Connection, Text, cast, delete, insert, select, update

from stateloop.store import memory_files, rows, schema
from stateloop.store.errors import BlockLimitError, NotFoundError
from stateloop.store.memory_repo import (
    Author,
    NewCommit,
    agent_block_rows,
    block_files,
    build_commit,
    commit_agents,
    current_author,
    kept_names,
    lock_for_blocks,
    lock_heads,
    store_commits,
)
from stateloop.store.records import BlockRecord
from stateloop.store.runner import Runner

mc, mo, mh = schema.memory_commits, schema.memory_objects, schema.memory_heads
b, ba = schema.blocks, schema.blocks_agents
MAX_PAGE = 1000


@dataclass(slots=True)
class MemoryCommitRecord:
    """One commit of an agent's memory (Letta's ``MemoryCommit`` fields, and its ``seq``)."""

    seq: int
    sha: str
    parent_sha: str | None
    message: str
    author_type: str
    author_id: str
    author_name: str | None
    timestamp: float
    files_changed: list[str] = field(default_factory=list)
    additions: int = 0
    deletions: int = 0


def _decode(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def load_object(conn: Connection, agent_id: str, sha: str) -> ShaFile:
    """One object of the agent's repository; ``NotFoundError`` names a missing one."""
    row = conn.execute(select(mo.c.type, mo.c.data).where(mo.c.agent_id == agent_id)
                       .where(mo.c.sha == sha)).first()
    if row is None:
        raise NotFoundError(f"agent {agent_id!r} has no memory commit or object {sha!r}")
    return ShaFile.from_raw_string(row.type, bytes(row.data))


def resolve(conn: Connection, agent_id: str, ref: str) -> str:
    """A full commit sha from ``HEAD``, a sha or a unique prefix of at least 4 digits."""
    if ref in ("HEAD", "main", "refs/heads/main"):
        sha = conn.execute(select(mh.c.sha).where(mh.c.agent_id == agent_id)).scalar()
        if sha is None:
            raise NotFoundError(f"agent {agent_id!r} has no memory commits")
        return str(sha)
    ref = ref.lower()
    if len(ref) < 4 or len(ref) > 40 or any(ch not in "0123456789abcdef" for ch in ref):
        raise NotFoundError(f"{ref!r} is not a commit sha")
    found = conn.execute(select(mc.c.sha).where(mc.c.agent_id == agent_id)
                         .where(mc.c.sha.startswith(ref, autoescape=True)).limit(2)
                         ).scalars().all()
    if len(found) != 1:
        raise NotFoundError(f"agent {agent_id!r} has {'no' if not found else 'more than one'} "
                            f"memory commit {ref!r}")
    return str(found[0])


def files_at(conn: Connection, agent_id: str, sha: str) -> dict[str, str]:
    """Path -> text of every file in the commit's tree."""
    commit = load_object(conn, agent_id, sha)
    if not isinstance(commit, Commit):
        raise NotFoundError(f"{sha!r} is not a commit")
    found: dict[str, str] = {}
    _walk(conn, agent_id, commit.tree.decode(), "", found)
    return found


def _walk(conn: Connection, agent_id: str, tree_sha: str, prefix: str,
          found: dict[str, str]) -> None:
    tree = load_object(conn, agent_id, tree_sha)
    assert isinstance(tree, Tree)
    for entry in tree.items():
        path = prefix + entry.path.decode()
        if entry.mode == 0o040000:
            _walk(conn, agent_id, entry.sha.decode(), path + "/", found)
        else:
            blob = load_object(conn, agent_id, entry.sha.decode())
            found[path] = blob.as_raw_string().decode(errors="replace")


def _line_counts(before: str, after: str) -> tuple[int, int]:
    added = removed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, before.splitlines(), after.splitlines(), autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            removed += i2 - i1
        if op in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def list_commits(conn: Connection, agent_id: str, *, path: str | None = None,
                 limit: int = 50, before: int | None = None) -> list[MemoryCommitRecord]:
    """The agent's commits newest first (those that changed ``path``, if given), below seq
    ``before``; each with its changed files and lines added and removed."""
    stmt = select(mc).where(mc.c.agent_id == agent_id)
    if before is not None:
        stmt = stmt.where(mc.c.seq < before)
    limit = min(limit, MAX_PAGE)
    if path is None:
        found = conn.execute(stmt.order_by(mc.c.seq.desc()).limit(limit)).all()
    else:  # the commits whose changes name the file (as JSON text), then exactly
        needle = orjson.dumps(path).decode()
        stmt = stmt.where(cast(mc.c.changes, Text).contains(needle, autoescape=True))
        found = []
        for row in conn.execute(stmt.order_by(mc.c.seq.desc())):
            if path in _decode(row.changes):
                found.append(row)
                if len(found) == limit:
                    break
    changes = [(row, _decode(row.changes)) for row in found]
    wanted = {sha for _, change in changes for pair in change.values() for sha in pair if sha}
    texts: dict[str, str] = {}
    if wanted:
        for sha, data in conn.execute(select(mo.c.sha, mo.c.data).where(mo.c.agent_id == agent_id)
                                      .where(mo.c.sha.in_(wanted))):
            texts[sha] = bytes(data).decode(errors="replace")
    records = []
    for row, change in changes:
        added = removed = 0
        for old, new in change.values():
            a, r = _line_counts(texts.get(old, "") if old else "",
                                texts.get(new, "") if new else "")
            added, removed = added + a, removed + r
        records.append(MemoryCommitRecord(
            row.seq, row.sha, row.parent_sha, row.message, row.author_type, row.author_id,
            row.author_name, row.created_at, sorted(change), added, removed))
    return records


def revert(conn: Connection, agent_id: str, sha: str, *, label: str | None,
           author: Author) -> str | None:
    """Set the agent's memory (or the block with ``label``) to what it was at ``sha`` and
    commit that. Whole, the memory then equals ``sha``'s: blocks made since are detached,
    and deleted when no other agent, group or identity holds them (a shared block stays
    theirs); blocks gone since come back; files that are not blocks are ``sha``'s. A block
    shared with other agents changes for them too, as a commit in each. The new commit's
    sha, or None when nothing differs."""
    texts = files_at(conn, agent_id, sha)
    v2 = "MEMORY.md" in texts
    old = {path: memory_files.parse(path, text, v2=v2) for path, text in texts.items()
           if memory_files.label_of(path) is not None}
    by_label = {str(memory_files.label_of(path)): parsed for path, parsed in old.items()}
    current = {row.label: rows.block_from_row(row) for row in conn.execute(
        select(b).join(ba, ba.c.block_id == b.c.id).where(ba.c.agent_id == agent_id))}
    if label is not None:
        if label not in by_label and label not in current:
            raise NotFoundError(f"agent {agent_id!r} had no block {label!r} at {sha[:12]}")
        by_label = {label: by_label[label]} if label in by_label else {}
        current = {label: current[label]} if label in current else {}
    # Heads before block rows, as every writer takes them (no wait in a cycle).
    lock_for_blocks(conn, [block.id for block in current.values()])
    parent, head_files = lock_heads(conn, [agent_id])[agent_id]
    now = time.time()
    for name, parsed in by_label.items():
        apply_file(conn, agent_id, name, parsed, current.get(name), now)
    for name, block in current.items():
        if name not in by_label:
            conn.execute(delete(ba).where(ba.c.agent_id == agent_id)
                         .where(ba.c.block_id == block.id))
            if not _held_elsewhere(conn, block.id):
                conn.execute(delete(b).where(b.c.id == block.id))
    message = f"Revert {label + ' ' if label else ''}to {sha[:12]}"
    other = None
    if label is None:
        other = {path: entry for path, entry in tree_files(conn, agent_id, sha).items()
                 if memory_files.label_of(path) is None}
    # Each file keeps the name it had then (a file of the head not reverted, the head's).
    names = {**kept_names(conn, agent_id, head_files),
             **{path: parsed.name for path, parsed in old.items() if parsed.name
                and parsed.name != memory_files.default_name(path)
                and memory_files.skill_name(str(memory_files.label_of(path))) is None}}
    new = build_commit(agent_id, parent, head_files, block_files(agent_block_rows(
        conn, agent_id), names), author, message, now, other=other, names=names)
    store_commits(conn, [new] if new else [], now)
    # Shared blocks changed for the agents sharing them: a commit in each of theirs.
    commit_agents(conn, block_ids=[block.id for block in current.values()], author=author,
                  message=message, now=now)
    return new.commit.id.decode() if new else None


def _held_elsewhere(conn: Connection, block_id: str) -> bool:
    """Whether another agent, a group or an identity holds the block."""
    return any(conn.execute(select(table.c.block_id).where(table.c.block_id == block_id)
                            .limit(1)).first() is not None
               for table in (ba, schema.group_blocks, schema.identities_blocks))


def tree_files(conn: Connection, agent_id: str, sha: str) -> dict[str, list[Any]]:
    """Path -> [mode, blob sha] of every file in the commit's tree."""
    commit = load_object(conn, agent_id, sha)
    if not isinstance(commit, Commit):
        raise NotFoundError(f"{sha!r} is not a commit")
    found: dict[str, list[Any]] = {}
    stack = [(commit.tree.decode(), "")]
    while stack:
        tree_sha, prefix = stack.pop()
        tree = load_object(conn, agent_id, tree_sha)
        assert isinstance(tree, Tree)
        for entry in tree.items():
            path = prefix + entry.path.decode()
            if entry.mode == 0o040000:
                stack.append((entry.sha.decode(), path + "/"))
            else:
                found[path] = [entry.mode, entry.sha.decode()]
    return found


def apply_file(conn: Connection, agent_id: str, label: str, parsed: memory_files.BlockFile,
               block: BlockRecord | None, now: float) -> None:
    """Write a block as a file says it is: the existing one changed, or a new one attached."""
    changes: dict[str, Any] = {"value": parsed.value}
    for name in ("description", "read_only", "metadata", "limit"):
        value = getattr(parsed, name)
        if value is not None or (name == "description" and "description" in parsed.said):
            changes[name] = value
    if block is None:
        block = BlockRecord(label=label, created_at=now, updated_at=now)
        new = dataclasses.replace(block, **changes)
        _within_limit(new)
        conn.execute(insert(b), rows.block_values(new))
        position = conn.execute(select(ba.c.position).where(ba.c.agent_id == agent_id)
                                .order_by(ba.c.position.desc()).limit(1)).scalar()
        conn.execute(insert(ba).values(agent_id=agent_id, block_id=new.id, label=label,
                                       position=0 if position is None else position + 1))
        return
    new = dataclasses.replace(block, **changes, updated_at=now)
    _within_limit(new)
    if new != dataclasses.replace(block, updated_at=now):
        values = {k: v for k, v in rows.block_values(new).items() if k != "id"}
        conn.execute(update(b).where(b.c.id == block.id).values(**values))


def _within_limit(block: BlockRecord) -> None:
    if len(block.value) > block.limit:
        raise BlockLimitError(f"block {block.label!r}: value is {len(block.value)} characters, "
                              f"over its limit of {block.limit}")


class MemoryHistoryMixin:
    """Memory history methods of ``SqlStore``."""

    _runner: Runner
    _block_writes: int

    async def memory_commits(self, agent_id: str, *, label: str | None = None,
                             limit: int = 50, before: int | None = None
                             ) -> list[MemoryCommitRecord]:
        """The agent's memory commits, newest first; those that changed ``label``'s file."""
        path = None if label is None else memory_files.path_of(label)

        def read(conn: Connection) -> list[MemoryCommitRecord]:
            _known(conn, agent_id)
            return list_commits(conn, agent_id, path=path, limit=limit, before=before)

        return await self._runner.read(read)

    async def memory_files(self, agent_id: str, ref: str = "HEAD") -> tuple[str, dict[str, str]]:
        """The commit ``ref`` names (a sha, a prefix, ``HEAD``) and its files."""

        def txn(conn: Connection) -> tuple[str, dict[str, str]]:
            _known(conn, agent_id)
            sha = resolve(conn, agent_id, ref)
            return sha, files_at(conn, agent_id, sha)

        return await self._runner.read(txn)

    async def memory_repository(self, agent_id: str, *, objects: bool = True
                                ) -> tuple[str, list[tuple[bytes, int, bytes]]]:
        """The agent's head commit and every object of its repository (sha, type number,
        raw data), or without ``objects`` only the head's; an agent with no commit yet
        (made before history was kept) gets its first."""

        def read(conn: Connection) -> tuple[str | None, list[tuple[bytes, int, bytes]]]:
            _known(conn, agent_id)
            head = conn.execute(select(mh.c.sha).where(mh.c.agent_id == agent_id)).scalar()
            stmt = select(mo.c.sha, mo.c.type, mo.c.data).where(mo.c.agent_id == agent_id)
            if not objects:  # the head commit alone: what a ref advertisement reads
                stmt = stmt.where(mo.c.sha == head)
            found = conn.execute(stmt)
            return head, [(sha.encode(), kind, bytes(data)) for sha, kind, data in found]

        head, found = await self._runner.read(read)
        if head is None:
            who = current_author()
            await self._runner.write(lambda conn: commit_agents(
                conn, [agent_id], author=who, message="Start memory history"))
            head, found = await self._runner.read(read)
        assert head is not None
        return head, found

    async def memory_export(self, agent_id: str) -> tuple[str, list[dict[str, Any]],
                                                            list[tuple[str, int, bytes]]]:
        """The agent's whole repository: its head, its commits oldest first (sha, author
        and time), and every object (sha, type number, raw data)."""
        head, found = await self.memory_repository(agent_id)

        def read(conn: Connection) -> list[dict[str, Any]]:
            return [dict(row._mapping) for row in conn.execute(
                select(mc.c.sha, mc.c.author_type, mc.c.author_id, mc.c.author_name,
                       mc.c.created_at).where(mc.c.agent_id == agent_id).order_by(mc.c.seq))]

        return head, await self._runner.read(read), [(sha.decode(), kind, data)
                                                     for sha, kind, data in found]

    async def import_memory_history(self, agent_id: str, made: Sequence[NewCommit],
                                    author: Author, message: str) -> None:
        """Give a new agent a history (``made``: its commits oldest first, the first one
        carrying every object) in place of the one it started with, and commit its blocks
        on top when they differ from that history's head."""

        def txn(conn: Connection) -> None:
            lock_heads(conn, [agent_id])
            conn.execute(delete(mc).where(mc.c.agent_id == agent_id))
            conn.execute(delete(mo).where(mo.c.agent_id == agent_id))
            for commit in made:
                commit.agent_id = agent_id
            now = time.time()
            store_commits(conn, made, now)
            commit_agents(conn, [agent_id], author=author, message=message, now=now)

        await self._runner.write(txn, offload=True)
        self._block_writes += 1

    async def revert_memory(self, agent_id: str, ref: str, *, label: str | None = None
                            ) -> str | None:
        """Set the agent's blocks (or one) back to commit ``ref``, as a new commit (its sha;
        None when nothing differed)."""
        who = current_author()

        def txn(conn: Connection) -> str | None:
            _known(conn, agent_id)
            return revert(conn, agent_id, resolve(conn, agent_id, ref), label=label,
                          author=who)

        result = await self._runner.write(txn)
        self._block_writes += 1
        return result


def _known(conn: Connection, agent_id: str) -> None:
    if conn.execute(select(schema.agents.c.id).where(schema.agents.c.id == agent_id)
                    ).first() is None:
        raise NotFoundError(f"agent with id {agent_id!r} not found")


def unified_diff(before: Mapping[str, str], after: Mapping[str, str],
                 paths: Sequence[str] | None = None) -> str:
    """A unified diff (as ``git diff`` prints) from one set of files to another."""
    out: list[str] = []
    for path in sorted(paths if paths is not None else before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        for line in difflib.unified_diff(
                (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
                "/dev/null" if old is None else f"a/{path}",
                "/dev/null" if new is None else f"b/{path}"):
            out.append(line if line.endswith("\n") else
                       line + "\n\\ No newline at end of file\n")
    return "".join(out)
