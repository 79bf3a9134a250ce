"""Blocks in the SQL store: create, read, list, change, attach, detach and delete them.
Every write is also a commit in its agents' memory repositories (memory_repo.py) and
bumps the store's count of block writes (block_changes.py)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from stateloop.store import rows, schema
from stateloop.store.block_changes import block_records
from stateloop.store.catalog import identities_linked
from stateloop.store.errors import BlockLimitError, DuplicateError, NotFoundError
from stateloop.store.memory_repo import Author, commit_agents, current_author, lock_for_blocks
from stateloop.store.paging import keyset
from stateloop.store.projects import acting_project
from stateloop.store.records import EVERYTHING, BlockRecord, Page
from stateloop.store.runner import Runner

a, b, ba, ib = schema.agents, schema.blocks, schema.blocks_agents, schema.identities_blocks

_BLOCK_MUTABLE = frozenset(rows.BLOCK_FIELDS) - {"id", "created_at"}


class BlocksMixin:
    """The ``Store``'s block operations (mixed into ``SqlStore``)."""

    _runner: Runner
    _block_writes: int

    async def create_block(self, block: BlockRecord, *, agent_id: str | None = None,
                           ) -> BlockRecord:
        """Store a block (over-limit values are refused), attaching it to ``agent_id``."""
        check_limit(block)
        who = current_author()

        def txn(conn: Connection) -> None:
            conn.execute(insert(b), rows.block_values(block))
            if agent_id is not None:
                _require_agent(conn, agent_id)
                link_block(conn, agent_id, block)
                commit_agents(conn, [agent_id], author=who)

        await self._runner.write(txn)
        return block

    async def get_block(self, block_id: str) -> BlockRecord:
        """The block with this id."""
        return await self._runner.read(lambda conn: _load_block(conn, block_id))

    async def get_agent_block(self, agent_id: str, label: str) -> BlockRecord:
        """The agent's block with this label; the error lists the labels it has."""
        return await self._runner.read(lambda conn: _load_agent_block(conn, agent_id, label))

    async def list_blocks(self, agent_id: str | None = None, *, label: str | None = None,
                          identity_id: str | None = None,
                          identifier_keys: Sequence[str] | None = None,
                          page: Page = EVERYTHING) -> list[BlockRecord]:
        """The blocks on ``page`` (default: all, oldest first): an agent's, in attach order;
        or those (of the acting project) with this label, linked to this identity and/or to
        an identity with one of these keys; read in SQL."""
        if agent_id is not None:
            mine = (ba.c.agent_id == agent_id,)
            attached = select(b).join(ba, ba.c.block_id == b.c.id).where(*mine)
            return await self._runner.read(lambda conn: block_records(conn, keyset(
                conn, attached, ba, page, key=(ba.c.position, ba.c.block_id),
                ident=ba.c.block_id, scope=mine)))
        stmt = select(b)
        if (project := acting_project.get()) is not None:
            stmt = stmt.where(b.c.project == project)
        if label is not None:
            stmt = stmt.where(b.c.label == label)
        if identity_id is not None or identifier_keys:
            stmt = stmt.where(b.c.id.in_(identities_linked(
                ib.c.block_id, ib.c.identity_id, identity_id, identifier_keys)))
        return await self._runner.read(
            lambda conn: block_records(conn, keyset(conn, stmt, b, page)))

    async def agents_blocks(self, agent_ids: Sequence[str]) -> dict[str, list[BlockRecord]]:
        """Each of these agents' blocks in attach order, in one query (a page's)."""
        stmt = (select(ba.c.agent_id, b).join(ba, ba.c.block_id == b.c.id)
                .where(ba.c.agent_id.in_(list(agent_ids))).order_by(ba.c.position))

        def txn(conn: Connection) -> dict[str, list[BlockRecord]]:
            found: dict[str, list[BlockRecord]] = {agent_id: [] for agent_id in agent_ids}
            for row in conn.execute(stmt):
                found[row.agent_id].append(rows.block_from_row(row))
            return found

        return await self._runner.read(txn)

    async def update_block(self, block_id: str, **changes: Any) -> BlockRecord:
        """Change block fields; a value over the limit is refused and nothing changes."""
        unknown = set(changes) - _BLOCK_MUTABLE
        if unknown:
            raise TypeError(f"update_block: unknown or read-only fields {sorted(unknown)}")

        who = current_author()

        def txn(conn: Connection) -> BlockRecord:
            return _update_block(conn, _load_block(conn, block_id), changes, who)

        result = await self._runner.write(txn)
        self._block_writes += 1
        return result

    async def update_agent_block(self, agent_id: str, label: str, **changes: Any) -> BlockRecord:
        """Change the agent's block with this label (what memory tools call)."""
        unknown = set(changes) - _BLOCK_MUTABLE
        if unknown:
            raise TypeError(f"update_agent_block: unknown or read-only fields {sorted(unknown)}")

        who = current_author()

        def txn(conn: Connection) -> BlockRecord:
            return _update_block(conn, _load_agent_block(conn, agent_id, label), changes, who)

        result = await self._runner.write(txn)
        self._block_writes += 1
        return result

    async def attach_block(self, agent_id: str, block_id: str) -> None:
        """Share an existing block with an agent; its label must be free on that agent."""

        who = current_author()

        def txn(conn: Connection) -> None:
            _require_agent(conn, agent_id)
            link_block(conn, agent_id, _load_block(conn, block_id))
            commit_agents(conn, [agent_id], author=who)

        await self._runner.write(txn)
        self._block_writes += 1

    async def detach_block(self, agent_id: str, block_id: str) -> None:
        """Unlink a block from an agent (the block itself stays)."""

        who = current_author()

        def txn(conn: Connection) -> None:
            gone = conn.execute(delete(ba).where(ba.c.agent_id == agent_id)
                                .where(ba.c.block_id == block_id)).rowcount
            if not gone:
                raise NotFoundError(f"block {block_id!r} is not attached to agent {agent_id!r}")
            commit_agents(conn, [agent_id], author=who)

        await self._runner.write(txn)
        self._block_writes += 1

    async def delete_block(self, block_id: str) -> None:
        """Delete a block everywhere it is attached."""

        who = current_author()

        def txn(conn: Connection) -> None:
            agents = conn.execute(select(ba.c.agent_id).where(ba.c.block_id == block_id)
                                  ).scalars().all()
            if not conn.execute(delete(b).where(b.c.id == block_id)).rowcount:
                raise NotFoundError(f"no block with id {block_id!r}")
            commit_agents(conn, agents, author=who)

        await self._runner.write(txn)
        self._block_writes += 1


def check_limit(block: BlockRecord) -> None:
    """Refuse a block whose value is over its limit (``BlockLimitError``)."""
    if len(block.value) > block.limit:
        raise BlockLimitError(
            f"block {block.label!r}: value is {len(block.value)} characters, over its "
            f"limit of {block.limit}")


def _require_agent(conn: Connection, agent_id: str) -> None:
    if conn.execute(select(a.c.id).where(a.c.id == agent_id)).first() is None:
        raise NotFoundError(f"agent with id {agent_id!r} not found")


def _load_block(conn: Connection, block_id: str) -> BlockRecord:
    row = conn.execute(select(b).where(b.c.id == block_id)).first()
    if row is None:
        raise NotFoundError(f"no block with id {block_id!r}")
    return rows.block_from_row(row)


def _load_agent_block(conn: Connection, agent_id: str, label: str) -> BlockRecord:
    row = conn.execute(select(b).join(ba, ba.c.block_id == b.c.id)
                       .where(ba.c.agent_id == agent_id).where(ba.c.label == label)).first()
    if row is not None:
        return rows.block_from_row(row)
    _require_agent(conn, agent_id)
    labels = conn.execute(select(ba.c.label).where(ba.c.agent_id == agent_id)
                          .order_by(ba.c.position)).scalars().all()
    raise NotFoundError(f"agent {agent_id!r} has no block labelled {label!r}; "
                        f"its blocks are: {', '.join(labels) or '(none)'}")


def link_block(conn: Connection, agent_id: str, block: BlockRecord) -> None:
    """Attach the block to the agent, last; its label must be free on that agent."""
    taken = conn.execute(select(ba.c.block_id).where(ba.c.agent_id == agent_id)
                         .where(ba.c.label == block.label)).scalar()
    if taken is not None:
        raise DuplicateError(f"agent {agent_id!r} already has a block labelled {block.label!r}")
    position = conn.execute(select(func.coalesce(func.max(ba.c.position), -1) + 1)
                            .where(ba.c.agent_id == agent_id)).scalar()
    conn.execute(insert(ba).values(agent_id=agent_id, block_id=block.id, label=block.label,
                                   position=position))


def _update_block(conn: Connection, current: BlockRecord, changes: dict[str, Any],
                  author: Author) -> BlockRecord:
    new = dataclasses.replace(current, **changes, updated_at=time.time())
    check_limit(new)
    lock_for_blocks(conn, [current.id])
    if new.label != current.label:
        clash = conn.execute(
            select(ba.c.agent_id).where(ba.c.label == new.label)
            .where(ba.c.agent_id.in_(select(ba.c.agent_id).where(ba.c.block_id == current.id)))
        ).scalar()
        if clash is not None:
            raise DuplicateError(f"agent {clash!r} already has a block labelled {new.label!r}")
        conn.execute(update(ba).where(ba.c.block_id == current.id).values(label=new.label))
    values = {k: v for k, v in rows.block_values(new).items() if k != "id"}
    conn.execute(update(b).where(b.c.id == current.id).values(**values))
    commit_agents(conn, block_ids=[current.id], author=author)
    return new
