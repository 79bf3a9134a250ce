"""How statements reach the database: two interchangeable runners over SQLAlchemy Core.

Store code is written as plain functions of a sync ``Connection``; a runner decides where
they execute. Measured on this machine, one asyncio<->thread hop costs ~175 us while a
whole SQLite WAL step commit costs ~30 us, and aiosqlite makes several hops per
statement (~4 ms for one persisted step). So the default SQLite runner commits writes
inline on the event loop (serialised by a lock, never waiting on another in-process
writer) and sends reads to a thread. ``AsyncRunner`` is the fully async path (aiosqlite
now, asyncpg later) with the same semantics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from stateloop.store.dialect import begin_sqlite, configure_sqlite_connection

T = TypeVar("T")


class Runner(Protocol):
    """Runs a function of a sync Connection inside one transaction."""

    async def write(self, fn: Callable[[Connection], T], *, offload: bool = False,
                    raw: bool = False) -> T: ...

    async def read(self, fn: Callable[[Connection], T]) -> T: ...

    async def close(self) -> None: ...

    def data_version(self) -> int | None:
        """SQLite's data_version, which other connections' commits change; None if unknown."""
        ...


def _install_sqlite_events(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        configure_sqlite_connection(dbapi_conn)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        begin_sqlite(conn)


class SqliteRunner:
    """Writes inline on one long-lived connection; reads on pooled connections in a thread."""

    def __init__(self, sync_url: str) -> None:
        self.engine = create_engine(
            sync_url, connect_args={"check_same_thread": False}, pool_size=4, max_overflow=4)
        _install_sqlite_events(self.engine)
        self._lock = asyncio.Lock()
        self._writer: Connection | None = None

    def _writer_conn(self) -> Connection:
        if self._writer is None:
            self._writer = self.engine.connect().execution_options(stateloop_write=True)
        return self._writer

    def _write_sync(self, fn: Callable[[Connection], T]) -> T:
        conn = self._writer_conn()
        with conn.begin():
            return fn(conn)

    def _write_raw(self, fn: Callable[[Connection], T]) -> T:
        """The per-step path: ``fn`` uses only the DBAPI connection (FastStatement), so the
        transaction is opened and closed there too, without SQLAlchemy's bookkeeping."""
        conn = self._writer_conn()
        dbapi = conn.connection.dbapi_connection
        assert dbapi is not None
        dbapi.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
        except BaseException:
            dbapi.execute("ROLLBACK")
            raise
        dbapi.execute("COMMIT")
        return result

    async def write(self, fn: Callable[[Connection], T], *, offload: bool = False,
                    raw: bool = False) -> T:
        """Run ``fn`` in one write transaction; ``offload`` for big batches (imports);
        ``raw`` when ``fn`` only touches the DBAPI connection."""
        async with self._lock:
            if offload:
                return await asyncio.to_thread(self._write_sync, fn)
            return self._write_raw(fn) if raw else self._write_sync(fn)

    def _read_sync(self, fn: Callable[[Connection], T]) -> T:
        with self.engine.connect() as conn, conn.begin():
            return fn(conn)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in a read transaction (a consistent snapshot) off the event loop."""
        return await asyncio.to_thread(self._read_sync, fn)

    def data_version(self) -> int | None:
        if self._lock.locked():  # an offloaded write holds the connection
            return None
        raw = self._writer_conn().connection.dbapi_connection
        return int(raw.execute("PRAGMA data_version").fetchone()[0])  # type: ignore[union-attr]

    async def close(self) -> None:
        async with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            self.engine.dispose()


class AsyncRunner:
    """Everything through an AsyncEngine (aiosqlite today; the shape PostgreSQL will use)."""

    def __init__(self, async_url: str) -> None:
        self.async_engine: AsyncEngine = create_async_engine(async_url)
        _install_sqlite_events(self.async_engine.sync_engine)
        self._lock = asyncio.Lock()  # SQLite has one writer; queue ours instead of busy-waiting

    async def write(self, fn: Callable[[Connection], T], *, offload: bool = False,
                    raw: bool = False) -> T:
        """Run ``fn`` in one write transaction."""
        async with self._lock, self.async_engine.connect() as conn:
            conn = await conn.execution_options(stateloop_write=True)
            async with conn.begin():
                return await conn.run_sync(fn)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in a read transaction."""
        async with self.async_engine.connect() as conn, conn.begin():
            return await conn.run_sync(fn)

    async def close(self) -> None:
        await self.async_engine.dispose()

    def data_version(self) -> int | None:
        return None  # no connection to ask without a round trip: callers re-read
