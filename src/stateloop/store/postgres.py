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

Nothing here needs a local file: which processes have the database open (presence.py on
SQLite) is read from ``pg_stat_activity``, where every connection of a store carries the
application name ``stateloop:<token>``; a process that dies loses its connections, and so
its presence, at once.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, create_engine, text

from stateloop import deepjson
from stateloop.store.batching import BatchFn, GroupCommit, Queued
from stateloop.store.dialect import POSTGRES_TX
from stateloop.store.errors import DatabaseOpenError

T = TypeVar("T")

APPLICATION = "stateloop:"
_OTHERS = text("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = "
               "current_database() AND application_name LIKE 'stateloop:%' "
               "AND application_name <> :me)")


class PostgresRunner:
    """Writes on one connection in a worker thread, one at a time; reads on pooled ones."""

    def __init__(self, sync_url: str) -> None:
        try:
            import psycopg  # noqa: F401
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
        self._queue = GroupCommit(POSTGRES_TX)
        self._flusher: asyncio.Task[None] | None = None

    def _writer_conn(self) -> Connection:
        if self._writer is None:
            self._writer = self.engine.connect()
        return self._writer

    def _write_sync(self, items: list[Any], fn: Callable[[Connection], T] | None,
                    raw: bool) -> T:
        conn = self._writer_conn()
        dbapi = conn.connection.dbapi_connection
        if raw or fn is None:
            result: T = self._queue.commit_items(items, conn, dbapi, then=fn)
            return result
        if items:
            self._queue.commit_items(items, conn, dbapi)
        with conn.begin():
            return fn(conn)

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
            return await self._in_thread(self._write_sync, self._queue.take(), fn, raw)

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
                    await self._in_thread(self._write_sync, items, None, True)
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

    def others_alive(self) -> bool:
        """Whether another store (in any process, on any machine) has the database open."""
        with self.engine.connect() as conn:
            return bool(conn.execute(_OTHERS, {"me": self.name}).scalar())

    def data_version(self, max_age: float = 0.0) -> int | None:
        return None  # no way to know without a round trip: callers re-read

    async def close(self) -> None:
        async with self._lock:
            try:
                items = self._queue.take()
                if items:
                    await self._in_thread(self._write_sync, items, None, True)
            finally:
                if self._writer is not None:
                    self._writer.close()
                    self._writer = None
                self.engine.dispose()
