"""A git push to an agent's memory repository, taken whole or not at all: the new commits
must descend from the head the pusher fetched (no edit is lost silently), every tree entry
must be a plain file or folder with a legal name, and every block file must parse and keep
its block's limit and ``read_only``. All of it is checked before anything is written, in the
transaction that then writes the blocks, the objects, the commits and the head."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Any

from dulwich.objects import Blob, Commit, ShaFile, Tree
from sqlalchemy import Connection, delete, select

from stateloop.store import memory_files, rows, schema
from stateloop.store.memory_history import apply_file
from stateloop.store.memory_repo import (
    DIR_MODE,
    FILE_MODE,
    Author,
    NewCommit,
    learn_name,
    lock_heads,
    store_commits,
)
from stateloop.store.records import DEFAULT_BLOCK_LIMIT, BlockRecord
from stateloop.store.runner import Runner

b, ba = schema.blocks, schema.blocks_agents
_MODES = {FILE_MODE, 0o100755, DIR_MODE}
MAX_LABEL = 200
MAX_FILES = 1000
MAX_DEPTH = 32


class PushRefused(Exception):
    """A push that changes nothing; the message is what git shows its user."""


@dataclass(slots=True)
class Push:
    """A push's new commits (oldest first), their objects, and the files of its head."""

    old: str
    new: str
    commits: list[NewCommit]
    objects: list[ShaFile]
    files: dict[str, list[Any]]  # path -> [mode, blob sha] of the new head
    blocks: dict[str, memory_files.BlockFile]  # label -> the block its file describes


def read_push(objects: Mapping[bytes, ShaFile], known: Container[bytes],
              pushed: list[ShaFile], old: str, new: str, head: str) -> Push:
    """Check a push (``objects`` holds the repository's objects and the pushed ones,
    ``known`` the shas stored already, ``pushed`` the objects it brought) and describe what
    it changes."""
    if old != head:
        raise PushRefused("the memory changed since your last fetch: pull, then push again")
    order: list[Commit] = []
    seen: set[bytes] = set()
    stack: list[tuple[bytes, bool]] = [(new.encode(), False)]
    while stack:  # the new commits, parents first
        sha, done = stack.pop()
        if done:
            order.append(objects[sha])  # type: ignore[arg-type]
            continue
        if sha in seen or sha in known:
            continue
        seen.add(sha)
        commit = objects.get(sha)
        if not isinstance(commit, Commit):
            raise PushRefused(f"{sha.decode()} is not a commit")
        stack.append((sha, True))
        stack.extend((parent, False) for parent in commit.parents)
    if not _descends(objects, known, new.encode(), head.encode()):
        raise PushRefused("non-fast-forward: the push does not build on the memory's head; "
                          "pull, then push again")
    files_of: dict[bytes, dict[str, list[Any]]] = {}
    made = []
    for commit in order:
        files = _files(objects, commit.tree, "")
        files_of[commit.id] = files
        parent = commit.parents[0] if commit.parents else None
        before = (files_of.get(parent) or _files(objects, objects[parent].tree, "")  # type: ignore[attr-defined]
                  if parent is not None else {})
        changes = {p: [before.get(p, [0, None])[1], files.get(p, [0, None])[1]]
                   for p in before.keys() | files.keys() if before.get(p) != files.get(p)}
        name, _, email = commit.author.decode(errors="replace").partition(" <")
        made.append(NewCommit("", parent.decode() if parent else None, commit, [], files,
                              changes, Author("user", email.rstrip(">") or name, name),
                              commit.message.decode(errors="replace").rstrip("\n")))
    files = files_of[new.encode()] if order else {}
    v2 = "MEMORY.md" in files  # Letta Code's layout: its indexes are all value
    blocks = {}
    for path, (_, sha) in files.items():
        try:
            label = block_label(path)
        except memory_files.MemoryFileError as exc:
            raise PushRefused(str(exc)) from exc
        if label is None:
            continue
        blob = objects[sha.encode()]
        assert isinstance(blob, Blob)
        try:
            text = blob.as_raw_string().decode()
        except UnicodeDecodeError as exc:
            raise PushRefused(f"{path}: not UTF-8 text") from exc
        try:
            blocks[label] = memory_files.parse(path, text, v2=v2)
        except memory_files.MemoryFileError as exc:
            raise PushRefused(str(exc)) from exc
        learn_name(sha, path, blocks[label].name)
    return Push(old, new, made, pushed, files, blocks)


def block_label(path: str) -> str | None:
    """The label of the block a file of a memory repository holds (None: it holds none);
    ``MemoryFileError`` naming the file when no block may have it (``label_problem``'s
    rules, and at most MAX_LABEL characters)."""
    try:
        label = memory_files.label_of(path)
    except memory_files.MemoryFileError as exc:
        raise memory_files.MemoryFileError(f"{path}: {exc}") from None
    if label is None:
        return None
    problem = memory_files.label_problem(label)
    if problem is None and len(label) > MAX_LABEL:
        problem = f"block label {label!r} is over {MAX_LABEL} characters"
    if problem is not None:
        raise memory_files.MemoryFileError(f"{path}: {problem}")
    return label


def _descends(objects: Mapping[bytes, ShaFile], known: Container[bytes], sha: bytes,
              head: bytes) -> bool:
    """Whether ``head`` is among ``sha``'s ancestors (or is it), walking new commits."""
    stack, seen = [sha], set()
    while stack:
        at = stack.pop()
        if at == head:
            return True
        if at in seen or at in known:
            continue
        seen.add(at)
        commit = objects.get(at)
        if isinstance(commit, Commit):
            stack.extend(commit.parents)
    return False


def tree_files(objects: Mapping[bytes, ShaFile], tree_sha: bytes) -> dict[str, list[Any]]:
    """Path -> [mode, blob sha] of a tree among ``objects``; ``PushRefused`` naming a missing
    object, an entry that is no plain file or folder, or a tree too deep or too large."""
    return _files(objects, tree_sha, "")


def _files(objects: Mapping[bytes, ShaFile], tree_sha: bytes, prefix: str
           ) -> dict[str, list[Any]]:
    if prefix.count("/") >= MAX_DEPTH:
        raise PushRefused(f"{prefix}: folders nest at most {MAX_DEPTH} deep")
    tree = objects.get(tree_sha)
    if not isinstance(tree, Tree):
        raise PushRefused(f"tree {tree_sha.decode()} is missing from the push")
    found: dict[str, list[Any]] = {}
    for entry in tree.items():
        name = entry.path.decode(errors="replace")
        if (entry.mode not in _MODES or name in ("", ".", "..") or "/" in name
                or "\\" in name or name.lower() == ".git"):
            raise PushRefused(f"{prefix}{name}: only plain files and folders with plain names "
                              "can be in a memory repository")
        if entry.mode == DIR_MODE:
            found.update(_files(objects, entry.sha, f"{prefix}{name}/"))
        else:
            if not isinstance(objects.get(entry.sha), Blob):
                raise PushRefused(f"{prefix}{name}: its content is missing from the push")
            found[f"{prefix}{name}"] = [entry.mode, entry.sha.decode()]
        if len(found) > MAX_FILES:
            raise PushRefused(f"a memory repository holds at most {MAX_FILES} files")
    return found


def apply_push(conn: Connection, agent_id: str, push: Push) -> None:
    """Store a checked push: refuse it if the head moved or a block would break its rules,
    then write blocks, objects, commits and head."""
    head = lock_heads(conn, [agent_id])[agent_id][0]
    if head != push.old:
        raise PushRefused("the memory changed since your last fetch: pull, then push again")
    current = {row.label: rows.block_from_row(row) for row in conn.execute(
        select(b).join(ba, ba.c.block_id == b.c.id).where(ba.c.agent_id == agent_id))}
    changed = _check_blocks(current, push.blocks)
    now = time.time()
    for label in changed:
        apply_file(conn, agent_id, label, push.blocks[label], current.get(label), now)
    for label, block in current.items():
        if label not in push.blocks:
            conn.execute(delete(ba).where(ba.c.agent_id == agent_id)
                         .where(ba.c.block_id == block.id))
    if not push.commits:
        return
    push.commits[0].made = list(push.objects)
    for commit in push.commits:
        commit.agent_id = agent_id
    push.commits[-1].files = push.files
    store_commits(conn, push.commits, now)


def _check_blocks(current: Mapping[str, BlockRecord],
                  wanted: Mapping[str, memory_files.BlockFile]) -> list[str]:
    """The labels whose blocks the push changes; ``PushRefused`` naming the first block
    that would break its limit or ``read_only``."""
    changed = []
    for label, parsed in wanted.items():
        block = current.get(label)
        limit = parsed.limit or (block.limit if block else DEFAULT_BLOCK_LIMIT)
        if len(parsed.value) > limit:
            raise PushRefused(f"block {label!r}: value is {len(parsed.value)} characters, over "
                              f"its limit of {limit}")
        if block is None:
            changed.append(label)
            continue
        after = dataclasses.replace(block, value=parsed.value, limit=limit, **{
            name: getattr(parsed, name) for name in ("read_only", "metadata")
            if getattr(parsed, name) is not None},
            description=parsed.description if "description" in parsed.said
            else block.description)
        if after != block:
            if block.read_only:
                raise PushRefused(f"block {label!r} is read-only")
            changed.append(label)
    for label, block in current.items():
        if label not in wanted and block.read_only:
            raise PushRefused(f"block {label!r} is read-only and cannot be deleted")
    return changed


class MemoryPushMixin:
    """``push_memory`` of ``SqlStore``."""

    _runner: Runner
    _block_writes: int

    async def push_memory(self, agent_id: str, push: Push) -> None:
        """Store a push ``read_push`` checked, or refuse it (``PushRefused``) unchanged."""
        await self._runner.write(lambda conn: apply_push(conn, agent_id, push), offload=True)
        self._block_writes += 1
