"""The PostgreSQL runner: the store's sync Connection functions on psycopg 3, off the event loop.

psycopg 3 rather than asyncpg: the store is written as functions of a sync SQLAlchemy
Connection and its step path runs compiled statements on the raw DBAPI cursor (fastpath.py);
psycopg is a DBAPI driver with the same cursor API as sqlite3, server-side binding with
automatic prepared statements, and a pipeline mode. asyncpg is not a DBAPI driver: every
statement would go through SQLAlchemy's async adaptation layer, greenlet hops included.

A network round trip must not block the event loop, so every transaction runs in a worker
thread; writes are serialised on one connection (as on SQLite: an agent's writes build on each
other), reads use pooled connections with a snapshot of their own (REPEATABLE READ). Step
checkpoints are queued and committed in groups (batching.py) by one flusher task: the steps of
agents that finish while a commit is in flight share the next one.

A group commit is one round trip: it runs in a psycopg pipeline (batching.py), and a read of
the block versions of the agents whose steps it holds (and of the others stepping lately)
rides with it (``BLOCK_VERSIONS``). An agent's next step compares those with the versions its
blocks were read at, so blocks another process changed are read again at once, and unchanged
ones are not read at all.

Nothing here needs a local file: which processes have the database open (presence.py on
SQLite) is read from ``pg_stat_activity``, where every connection of a store carries the
application name ``stateloop:<token>``; a process that dies loses its connections, and so
its presence, at once.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, create_engine, text

from stateloop import deepjson
from stateloop.store.batching import BatchFn, GroupCommit, Queued
from stateloop.store.dialect import POSTGRES_TX
from stateloop.store.errors import DatabaseOpenError

T = TypeVar("T")

APPLICATION = "stateloop:"
WATCH = 1.0  # seconds an agent that asked for its blocks' version is watched by every commit
WATCHED = 256  # at most this many of them (the latest to ask)
_OTHERS = text("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = "
               "current_database() AND application_name LIKE 'stateloop:%' "
               "AND application_name <> :me)")
# What an agent's blocks are, as one value per agent: every update of a row gives it a new
# xmin (the writing transaction's id), and attaching or detaching a block changes the set, so
# the value changes with any committed change to the agent's blocks, from any process.
_VERSION = ("md5(string_agg(ba.block_id || ':' || b.xmin::text || ':' || ba.xmin::text, ',' "
            "ORDER BY ba.block_id)) FROM blocks_agents ba JOIN blocks b ON b.id = ba.block_id")
BLOCK_VERSIONS = f"SELECT ba.agent_id, {_VERSION} WHERE ba.agent_id = ANY(%s) GROUP BY ba.agent_id"
# The same for one agent, as a scalar subquery ('' when it has no blocks, as above).
BLOCK_VERSION_OF = f"coalesce((SELECT {_VERSION} WHERE ba.agent_id = :agent), '')"
# The tables (of those named) on which the role lacks a right the store uses, and the
# sequences behind their serial columns it may not use; a table that is not there lacks all.
MISSING_RIGHTS = """
WITH wanted AS (SELECT name, to_regclass(quote_ident(name)) AS oid FROM unnest(%s::text[]) name)
SELECT w.name, string_agg(p.name, ', ' ORDER BY p.n) FROM wanted w
CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) WITH ORDINALITY p(name, n)
WHERE w.oid IS NULL OR NOT has_table_privilege(w.oid, p.name) GROUP BY w.name
UNION ALL
SELECT q.seqrelid::regclass::text, 'USAGE' FROM wanted w
JOIN pg_depend d ON d.refobjid = w.oid AND d.classid = 'pg_class'::regclass
JOIN pg_sequence q ON q.seqrelid = d.objid
WHERE NOT has_sequence_privilege(q.seqrelid, 'USAGE') ORDER BY 1"""
CHECK_TIMEOUT = 5  # seconds a readiness check waits for a new connection


def send_block_versions(dbapi: Any, agent_ids: Sequence[str]) -> Any:
    """Send ``BLOCK_VERSIONS`` for ``agent_ids``; the cursor, for ``block_versions``."""
    cursor = dbapi.cursor()
    cursor.execute(BLOCK_VERSIONS, (list(agent_ids),))
    return cursor


def block_versions(cursor: Any, agent_ids: Sequence[str]) -> dict[str, str]:
    """Agent id -> its blocks' version, from a cursor ``send_block_versions`` gave."""
    try:
        found = {agent_id: version for agent_id, version in cursor.fetchall()}
    finally:
        cursor.close()
    return {agent_id: found.get(agent_id, "") for agent_id in agent_ids}


def with_block_version(fn: Callable[[Connection], T], agent_id: str
                       ) -> Callable[[Connection], tuple[T, str]]:
    """``fn`` for a read transaction, which also reads the agent's blocks' version in the
    transaction's snapshot (taken at its first statement, this read)."""
    def txn(conn: Connection) -> tuple[T, str]:
        cursor = send_block_versions(conn.connection.dbapi_connection, [agent_id])
        return fn(conn), block_versions(cursor, [agent_id])[agent_id]

    return txn


class _PipelinedTx:
    """Transactions on the writer (``dialect.POSTGRES_TX``), and ``batch``: one sent whole."""

    begin = staticmethod(POSTGRES_TX.begin)
    commit = staticmethod(POSTGRES_TX.commit)
    rollback = staticmethod(POSTGRES_TX.rollback)
    in_transaction = staticmethod(POSTGRES_TX.in_transaction)

    def __init__(self) -> None:
        self.last_read: Callable[[Any], None] | None = None  # sent before COMMIT

    @contextmanager
    def batch(self, dbapi: Any) -> Iterator[None]:
        """A transaction of the block's statements and ``last_read``'s, sent in a pipeline
        with BEGIN, COMMIT and one Sync: one round trip. Raises what failed, rolled back.
        BEGIN is sent as a statement (autocommit on): psycopg's own waits for its reply."""
        dbapi.autocommit = True
        try:
            with dbapi.pipeline():
                dbapi.execute("BEGIN")
                yield
                if self.last_read is not None:
                    self.last_read(dbapi)
                dbapi.execute("COMMIT")
        finally:
            try:
                if POSTGRES_TX.in_transaction(dbapi):
                    dbapi.execute("ROLLBACK")
            finally:  # a broken connection refuses this too; the pool then replaces it
                dbapi.autocommit = False


class PostgresRunner:
    """Writes on one connection in a worker thread, one at a time; reads on pooled ones."""

    def __init__(self, sync_url: str) -> None:
        try:
            import psycopg  # noqa: F401  # lazy: optional: the PostgreSQL driver
        except ImportError as exc:
            raise DatabaseOpenError(
                "cannot open a PostgreSQL database: its driver is missing; "
                "pip install 'stateloop[postgres]'") from exc
        self.name = APPLICATION + secrets.token_hex(8)
        # "format" binds (%s) are positional, as fastpath.py needs.
        self.engine = create_engine(
            sync_url, paramstyle="format", pool_size=8, max_overflow=8,
            json_deserializer=deepjson.loads, connect_args={"application_name": self.name})
        self._lock = asyncio.Lock()
        self._writer: Connection | None = None
        self._tx = _PipelinedTx()
        self._queue = GroupCommit(self._tx)
        self._flusher: asyncio.Task[None] | None = None
        # agent id -> (when its step's commit ended, its blocks' version as read then)
        self._versions: dict[str, tuple[float, str]] = {}
        self._asked: dict[str, float] = {}  # agent id -> when it last asked, oldest first
        # agent id -> its blocks' version as read when its turn in the fleet began
        self._at_turn: dict[str, tuple[float, str]] = {}

    def _writer_conn(self) -> Connection:
        if self._writer is None:
            self._writer = self.engine.connect()
        return self._writer

    def connect_params(self) -> dict[str, Any]:
        """psycopg's connection parameters, as the pool's connections get them (the URL as
        SQLAlchemy reads it)."""
        _, params = self.engine.dialect.create_connect_args(self.engine.url)
        params.pop("context", None)  # the pool's type adapters: others read plain rows
        return {**params, "application_name": self.name}

    async def missing_rights(self, tables: Sequence[str]) -> tuple[str, list[str]]:
        """The role's name and what it lacks on ``tables``, e.g. ``messages (INSERT)``, read
        on a new connection: the pool's were made before a role could lose LOGIN or CONNECT.
        ``DatabaseOpenError`` when the server refuses the connection."""
        import psycopg  # lazy: optional: the PostgreSQL driver

        def check() -> tuple[str, list[str]]:
            try:
                with psycopg.connect(**self.connect_params(), autocommit=True,
                                     connect_timeout=CHECK_TIMEOUT) as conn:
                    role = conn.execute("SELECT current_user").fetchone()
                    missing = conn.execute(MISSING_RIGHTS, (list(tables),)).fetchall()
            except psycopg.Error as exc:
                raise DatabaseOpenError(str(exc).strip()) from None
            return str(role[0] if role else ""), [f"{name} ({rights})"
                                                  for name, rights in missing]

        return await asyncio.to_thread(check)

    def _watched(self, items: list[Any]) -> list[str]:
        """The agents whose blocks' versions a commit of ``items`` reads: those whose steps
        it holds (a chain is an agent) and those that asked for theirs lately (they are
        stepping), so many agents stepping at once keep each other's versions fresh."""
        now = time.monotonic()
        asked = self._asked
        for agent_id in [a for a, when in asked.items() if now - when > WATCH]:
            del asked[agent_id]
        chains = {batch.chain(item) for batch, item, _ in items} - {None}
        return sorted(chains | set(list(asked)[-WATCHED:]))

    def _write_sync(self, items: list[Any], fn: Callable[[Connection], T] | None,
                    raw: bool, agents: list[str]) -> T:
        conn = self._writer_conn()
        dbapi = conn.connection.dbapi_connection
        # Read last in the transaction, the versions include every commit before it.
        sent: list[Any] = []
        if agents:
            self._tx.last_read = lambda dbapi: sent.append(send_block_versions(dbapi, agents))
        try:
            if raw or fn is None:
                result: T = self._queue.commit_items(items, conn, dbapi, then=fn)
                return result
            if items:
                self._queue.commit_items(items, conn, dbapi)
            with conn.begin():
                return fn(conn)
        finally:
            self._tx.last_read = None
            if sent:
                self._record_versions(sent[-1], agents)

    def _record_versions(self, cursor: Any, agents: list[str]) -> None:
        import psycopg  # lazy: optional: the PostgreSQL driver

        try:
            versions = block_versions(cursor, agents)
        except psycopg.Error:  # the batch failed (and was written again without the read)
            return
        now = time.monotonic()
        for agent_id, version in versions.items():
            self._versions[agent_id] = (now, version)

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` in a worker thread; a cancelled caller still waits for it to end, so
        the writer connection is never used by two threads."""
        future = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            await asyncio.wait([future])
            raise

    async def write(self, fn: Callable[[Connection], T], *, offload: bool = False,
                    raw: bool = False) -> T:
        """Run ``fn`` in one write transaction, after the queued steps."""
        async with self._lock:
            items = self._queue.take()
            return await self._in_thread(self._write_sync, items, fn, raw, self._watched(items))

    def submit_batched(self, fn: BatchFn, item: Any) -> Queued:
        queued = self._queue.add(fn, item)
        if self._flusher is None:
            self._flusher = asyncio.ensure_future(self._flush())
        return queued

    async def _flush(self) -> None:
        """Commit the queue until it stays empty (its first turn comes after this one's, so
        every step that ends in this turn joins the first commit)."""
        try:
            while True:
                async with self._lock:
                    items = self._queue.take()
                    if not items:
                        return
                    await self._in_thread(self._write_sync, items, None, True,
                                          self._watched(items))
        finally:
            self._flusher = None

    async def barrier(self) -> None:
        flusher = self._flusher
        if flusher is not None:
            await asyncio.shield(flusher)

    def _read_sync(self, fn: Callable[[Connection], T]) -> T:
        with self.engine.connect() as conn:
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                return fn(conn)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in a read transaction (a consistent snapshot) off the event loop."""
        await self.barrier()
        return await asyncio.to_thread(self._read_sync, fn)

    def announce(self, address: str) -> None:
        pass  # servers on one PostgreSQL share its agents (fleet.py)

    def others_alive(self) -> bool:
        """Whether another store (in any process, on any machine) has the database open."""
        with self.engine.connect() as conn:
            return bool(conn.execute(_OTHERS, {"me": self.name}).scalar())

    def turn_began(self, agent_id: str, version: str) -> None:
        """The agent's turn in the fleet began, with its blocks at ``version`` (read in the
        same statement): its run's first ask (``blocks_version``) takes that version."""
        now = time.monotonic()
        for stale in [a for a, (when, _) in self._at_turn.items() if now - when > WATCH]:
            del self._at_turn[stale]  # a turn that took no step
        self._at_turn[agent_id] = (now, version)

    def blocks_version(self, agent_id: str, max_age: float = 0.0) -> str | None:
        """The version of the agent's blocks read as its turn began (at the first ask after
        that), else with its last step's commit, if that ended at most ``max_age`` seconds
        ago (a change committed by another process while that commit was in flight may be
        missed by one step more)."""
        self._asked.pop(agent_id, None)
        self._asked[agent_id] = time.monotonic()  # last: the newest askers are watched
        at_turn = self._at_turn.pop(agent_id, None)
        if at_turn is not None:
            return at_turn[1]
        found = self._versions.get(agent_id)
        if found is None or time.monotonic() - found[0] > max_age:
            return None
        return found[1]

    async def close(self) -> None:
        async with self._lock:
            try:
                items = self._queue.take()
                if items:
                    await self._in_thread(self._write_sync, items, None, True, [])
            finally:
                if self._writer is not None:
                    self._writer.close()
                    self._writer = None
                self.engine.dispose()
