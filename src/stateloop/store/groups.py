"""Groups in ``SqlStore``: the group record, its members in order, the blocks it shares with
every member (and its manager), and the group's own view of its conversation."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from stateloop.store import schema
from stateloop.store.errors import DuplicateError, NotFoundError
from stateloop.store.memory_repo import commit_agents
from stateloop.store.paging import keyset
from stateloop.store.projects import acting_project
from stateloop.store.records import EVERYTHING, GroupMessage, GroupRecord, Page
from stateloop.store.runner import Runner

g, gm, gb, gmsg = schema.groups, schema.group_members, schema.group_blocks, schema.group_messages
a, b, ba = schema.agents, schema.blocks, schema.blocks_agents

MANAGER_TYPES = ("round_robin", "supervisor", "dynamic", "sleeptime", "voice_sleeptime",
                 "swarm")


_COLUMNS = [c.name for c in g.columns if c.name != "project"]  # the store's to set
_MUTABLE = frozenset(_COLUMNS) - {"id", "created_at"} | {"agent_ids", "shared_block_ids"}


def managed_group(conn: Connection, agent_id: str) -> GroupRecord | None:
    """``GroupsMixin.managed_group`` in a transaction of the caller's."""
    row = conn.execute(select(g).where(g.c.manager_agent_id == agent_id)
                       .order_by((g.c.manager_type != "sleeptime"), g.c.created_at, g.c.id)
                       .limit(1)).first()
    return _read(conn, row) if row is not None else None


def _values(group: GroupRecord) -> dict[str, Any]:
    return {name: getattr(group, name) for name in _COLUMNS}


def _read(conn: Connection, row: Any) -> GroupRecord:
    return _read_many(conn, [row])[0]


def _read_many(conn: Connection, found: Sequence[Any]) -> list[GroupRecord]:
    """The groups of these rows, their members and shared blocks read in one query each."""
    ids = [row.id for row in found]
    members: dict[str, list[str]] = {}
    for group_id, agent_id in conn.execute(select(gm.c.group_id, gm.c.agent_id)
                                           .where(gm.c.group_id.in_(ids))
                                           .order_by(gm.c.position)):
        members.setdefault(group_id, []).append(agent_id)
    blocks: dict[str, list[str]] = {}
    for group_id, block_id in conn.execute(select(gb.c.group_id, gb.c.block_id)
                                           .where(gb.c.group_id.in_(ids))
                                           .order_by(gb.c.block_id)):
        blocks.setdefault(group_id, []).append(block_id)
    return [GroupRecord(**{name: row._mapping[name] for name in _COLUMNS},
                        agent_ids=members.get(row.id, []),
                        shared_block_ids=blocks.get(row.id, [])) for row in found]


def _load(conn: Connection, group_id: str) -> GroupRecord:
    row = conn.execute(select(g).where(g.c.id == group_id)).first()
    if row is None:
        raise NotFoundError(f"no group with id {group_id!r}")
    return _read(conn, row)


def _check_agents(conn: Connection, ids: Sequence[str]) -> None:
    if len(set(ids)) != len(ids):
        raise DuplicateError(f"agent_ids repeat: {list(ids)}")
    query = select(a.c.id).where(a.c.id.in_(list(ids)))
    if (project := acting_project.get()) is not None:  # another project's: not found
        query = query.where(a.c.project == project)
    found = set(conn.execute(query).scalars())
    missing = [agent_id for agent_id in ids if agent_id not in found]
    if missing:
        raise NotFoundError(f"agent with id {missing[0]!r} not found")


def _share(conn: Connection, agent_id: str, block_id: str) -> None:
    """Attach the block to the agent unless it already is; a label clash is refused."""
    block = conn.execute(select(b.c.id, b.c.label).where(b.c.id == block_id)).first()
    if block is None:
        raise NotFoundError(f"no block with id {block_id!r}")
    taken = conn.execute(select(ba.c.block_id).where(ba.c.agent_id == agent_id)
                         .where(ba.c.label == block.label)).scalar()
    if taken == block_id:
        return
    if taken is not None:
        raise DuplicateError(f"agent {agent_id!r} already has a block labelled {block.label!r}")
    position = conn.execute(select(func.coalesce(func.max(ba.c.position), -1) + 1)
                            .where(ba.c.agent_id == agent_id)).scalar()
    conn.execute(insert(ba).values(agent_id=agent_id, block_id=block_id, label=block.label,
                                   position=position))
    commit_agents(conn, [agent_id], message=f"Add {block.label} (shared by a group)")


def _everyone(group: GroupRecord) -> list[str]:
    return [*group.agent_ids, *([group.manager_agent_id] if group.manager_agent_id else [])]


def _set_members(conn: Connection, group: GroupRecord) -> None:
    found = set(conn.execute(select(b.c.id).where(b.c.id.in_(group.shared_block_ids)))
                .scalars())
    missing = [block_id for block_id in group.shared_block_ids if block_id not in found]
    if missing:
        raise NotFoundError(f"no block with id {missing[0]!r}")
    conn.execute(delete(gm).where(gm.c.group_id == group.id))
    for position, agent_id in enumerate(group.agent_ids):
        conn.execute(insert(gm).values(group_id=group.id, agent_id=agent_id, position=position))
    conn.execute(delete(gb).where(gb.c.group_id == group.id))
    for block_id in dict.fromkeys(group.shared_block_ids):
        conn.execute(insert(gb).values(group_id=group.id, block_id=block_id))
        for agent_id in _everyone(group):
            _share(conn, agent_id, block_id)


class GroupsMixin:
    """Group operations of ``SqlStore``."""

    _runner: Runner
    _block_writes: int

    async def create_group(self, group: GroupRecord) -> GroupRecord:
        """Store a group; every agent and shared block must exist. Shared blocks are
        attached to every member and the manager, in the same transaction."""

        def txn(conn: Connection) -> GroupRecord:
            _check_agents(conn, [*group.agent_ids,
                                 *([group.manager_agent_id] if group.manager_agent_id else [])])
            conn.execute(insert(g), _values(group))
            _set_members(conn, group)
            return _load(conn, group.id)

        stored = await self._runner.write(txn)
        self._block_writes += 1
        return stored

    async def get_group(self, group_id: str) -> GroupRecord:
        return await self._runner.read(lambda conn: _load(conn, group_id))

    async def list_groups(self, *, manager_type: str | None = None,
                          agent_id: str | None = None, project_id: str | None = None,
                          show_hidden: bool = False,
                          page: Page = EVERYTHING) -> list[GroupRecord]:
        """Groups on ``page`` (default: all, oldest first), optionally only those of a
        manager type or with an agent (as member or manager), read in SQL."""
        stmt = select(g)
        if (project := acting_project.get()) is not None:
            stmt = stmt.where(g.c.project == project)
        if manager_type is not None:
            stmt = stmt.where(g.c.manager_type == manager_type)
        if project_id is not None:
            stmt = stmt.where(g.c.project_id == project_id)
        if agent_id is not None:
            stmt = stmt.where(g.c.id.in_(select(gm.c.group_id).where(gm.c.agent_id == agent_id))
                              | (g.c.manager_agent_id == agent_id))
        if not show_hidden:
            stmt = stmt.where(g.c.hidden.is_(None) | (g.c.hidden.is_(False)))
        return await self._runner.read(
            lambda conn: _read_many(conn, conn.execute(keyset(conn, stmt, g, page)).all()))

    async def managed_group(self, agent_id: str) -> GroupRecord | None:
        """The group the agent manages (Letta's ``multi_agent_group``): its sleeptime group
        if it has one, else the oldest it manages."""
        return await self._runner.read(lambda conn: managed_group(conn, agent_id))

    async def managed_groups(self, agent_ids: Sequence[str]) -> dict[str, GroupRecord]:
        """``managed_group`` of each of these agents that manages one, in one query."""
        stmt = (select(g).where(g.c.manager_agent_id.in_(list(agent_ids)))
                .order_by((g.c.manager_type != "sleeptime"), g.c.created_at, g.c.id))

        def txn(conn: Connection) -> dict[str, GroupRecord]:
            found: dict[str, GroupRecord] = {}
            for row in conn.execute(stmt):
                if row.manager_agent_id not in found:
                    found[row.manager_agent_id] = _read(conn, row)
            return found

        return await self._runner.read(txn)

    async def count_groups(self) -> int:
        stmt = select(func.count()).select_from(g)
        if (project := acting_project.get()) is not None:
            stmt = stmt.where(g.c.project == project)
        return await self._runner.read(lambda conn: conn.execute(stmt).scalar_one())

    async def update_group(self, group_id: str, **changes: Any) -> GroupRecord:
        """Change fields of a group; new members and blocks are checked and shared."""
        unknown = set(changes) - _MUTABLE
        if unknown:
            raise ValueError(f"cannot change group fields: {', '.join(sorted(unknown))}")

        def txn(conn: Connection) -> GroupRecord:
            current = _load(conn, group_id)
            new = dataclasses.replace(current, **changes, updated_at=time.time())
            if "agent_ids" in changes or "manager_agent_id" in changes:
                _check_agents(conn, [*new.agent_ids, *([new.manager_agent_id]
                                                       if new.manager_agent_id else [])])
            values = {k: v for k, v in _values(new).items() if k != "id"}
            conn.execute(update(g).where(g.c.id == group_id).values(**values))
            if {"agent_ids", "shared_block_ids", "manager_agent_id"} & set(changes):
                _set_members(conn, new)
            return _load(conn, group_id)

        stored = await self._runner.write(txn)
        if {"agent_ids", "shared_block_ids", "manager_agent_id"} & set(changes):
            self._block_writes += 1  # members' blocks may have changed
        return stored

    async def delete_group(self, group_id: str) -> None:
        """Delete a group and its messages; its agents and blocks stay."""

        def txn(conn: Connection) -> None:
            if not conn.execute(delete(g).where(g.c.id == group_id)).rowcount:
                raise NotFoundError(f"no group with id {group_id!r}")

        await self._runner.write(txn)

    async def share_group_block(self, group_id: str, block_id: str, *, attach: bool) -> None:
        """Attach a block to the group and every member, or detach it from all of them."""

        def txn(conn: Connection) -> None:
            group = _load(conn, group_id)
            if conn.execute(select(b.c.id).where(b.c.id == block_id)).first() is None:
                raise NotFoundError(f"no block with id {block_id!r}")
            if attach:
                if block_id not in group.shared_block_ids:
                    conn.execute(insert(gb).values(group_id=group_id, block_id=block_id))
                for agent_id in _everyone(group):
                    _share(conn, agent_id, block_id)
                return
            conn.execute(delete(gb).where(gb.c.group_id == group_id)
                         .where(gb.c.block_id == block_id))
            conn.execute(delete(ba).where(ba.c.block_id == block_id)
                         .where(ba.c.agent_id.in_(_everyone(group))))
            commit_agents(conn, _everyone(group))

        await self._runner.write(txn)
        self._block_writes += 1

    # --- the group's conversation ---

    async def append_group_messages(self, group_id: str, messages: Sequence[GroupMessage],
                                    cursors: dict[str, int] | None = None) -> None:
        """Add messages to the group's view, with the members' cursors, in one transaction."""

        def txn(conn: Connection) -> None:
            for message in messages:
                values = {f.name: getattr(message, f.name)
                          for f in dataclasses.fields(message) if f.name != "seq"}
                key = conn.execute(insert(gmsg).values(group_id=group_id, **values)
                                   ).inserted_primary_key
                assert key is not None
                message.seq = key[0]
            if cursors is not None:
                conn.execute(update(g).where(g.c.id == group_id)
                             .values(cursors=cursors, updated_at=time.time()))

        await self._runner.write(txn)

    async def list_group_messages(self, group_id: str, *, after_seq: int = 0,
                                  limit: int | None = None,
                                  page: Page = EVERYTHING) -> list[GroupMessage]:
        """The group's messages on ``page`` (by default all) in the order they were said
        (``page.order``), stored after ``after_seq``, at most ``limit``; read in SQL."""
        if limit is not None:
            page = dataclasses.replace(page, limit=limit)

        def txn(conn: Connection) -> list[GroupMessage]:
            _load(conn, group_id)
            stmt = select(gmsg).where(gmsg.c.group_id == group_id).where(gmsg.c.seq > after_seq)
            stmt = keyset(conn, stmt, gmsg, page, key=(gmsg.c.seq,))
            return [GroupMessage(**{f.name: row._mapping[f.name]
                                    for f in dataclasses.fields(GroupMessage)})
                    for row in conn.execute(stmt).all()]

        return await self._runner.read(txn)

    async def update_group_message(self, group_id: str, message_id: str,
                                   text: str) -> GroupMessage:
        def txn(conn: Connection) -> GroupMessage:
            done = conn.execute(update(gmsg).where(gmsg.c.group_id == group_id)
                                .where(gmsg.c.id == message_id).values(text=text)).rowcount
            if not done:
                _load(conn, group_id)
                raise NotFoundError(f"group {group_id!r} has no message {message_id!r}")
            row = conn.execute(select(gmsg).where(gmsg.c.id == message_id)).one()
            return GroupMessage(**{f.name: row._mapping[f.name]
                                   for f in dataclasses.fields(GroupMessage)})

        return await self._runner.write(txn)

    async def reset_group_messages(self, group_id: str) -> None:
        """Forget the group's conversation (the members keep their own histories)."""

        def txn(conn: Connection) -> None:
            _load(conn, group_id)
            conn.execute(delete(gmsg).where(gmsg.c.group_id == group_id))
            conn.execute(update(g).where(g.c.id == group_id)
                         .values(cursors={}, updated_at=time.time()))

        await self._runner.write(txn)
