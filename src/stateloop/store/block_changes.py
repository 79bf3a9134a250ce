"""How an agent learns, cheaply, that its blocks may have changed: ``change_token`` before each
step, and ``read_blocks`` when it did.

On SQLite the token is the file's ``data_version`` (any other connection's commit changes
it); on PostgreSQL it is a version of the agent's own blocks read with each of its steps'
commits (postgres.py ``BLOCK_VERSIONS``). Either way it also counts the block writes made
through this store, which a token read before them cannot know of.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from stateloop.store import rows, schema
from stateloop.store.postgres import with_block_version
from stateloop.store.records import BlockRecord
from stateloop.store.runner import Runner

b, ba = schema.blocks, schema.blocks_agents


def agent_blocks(agent_id: str) -> Any:
    """The query of an agent's blocks, in attach order."""
    return (select(b).join(ba, ba.c.block_id == b.c.id).where(ba.c.agent_id == agent_id)
            .order_by(ba.c.position))


def block_records(conn: Connection, stmt: Any) -> list[BlockRecord]:
    return [rows.block_from_row(row) for row in conn.execute(stmt)]


class BlockChangesMixin:
    """``change_token`` and ``read_blocks`` of ``SqlStore``."""

    _runner: Runner
    _block_writes: int
    dialect: str

    def change_token(self, agent_id: str, max_age: float = 0.0) -> tuple[int, Any] | None:
        """Cheap and synchronous: differs from an earlier token (this one or ``read_blocks``')
        when the agent's blocks may have changed since (a block write through this store, or
        a commit from another connection, as known at most ``max_age`` seconds ago); None
        when that is not known without a read."""
        version = self._runner.blocks_version(agent_id, max_age)
        return None if version is None else (self._block_writes, version)

    async def read_blocks(self, agent_id: str) -> tuple[list[BlockRecord], tuple[int, Any] | None]:
        """An agent's blocks, and the ``change_token`` they are as of."""
        if self.dialect != "postgresql":  # SQLite's token is free: taken before the read
            token = self.change_token(agent_id)
            return await self._runner.read(
                lambda conn: block_records(conn, agent_blocks(agent_id))), token

        writes = self._block_writes
        blocks, version = await self._runner.read(with_block_version(
            lambda conn: block_records(conn, agent_blocks(agent_id)), agent_id))
        return blocks, (writes, version)
