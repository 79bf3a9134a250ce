"""How statements reach the database: two interchangeable runners over SQLAlchemy Core.

Store code is written as plain functions of a sync ``Connection``; a runner decides where
they execute. Measured on this machine, one asyncio<->thread hop costs ~175 us while a
whole SQLite WAL step commit costs ~30 us, and aiosqlite makes several hops per
statement (~4 ms for one persisted step). So the default SQLite runner commits writes
inline on the event loop (serialised by a lock, never waiting on another in-process
writer) and sends reads to a thread. Step checkpoints are queued with ``submit_batched``
and committed in groups at the next turn of the event loop, which ``barrier`` waits for
(batching.py). A writer thread was measured too and lost: the GIL hand-offs between the two
threads cost more than the commits they overlapped.
``AsyncRunner`` is the fully async path (aiosqlite now, asyncpg later) with the same
semantics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event

from stateloop import deepjson
from stateloop.store.batching import BatchFn, GroupCommit
from stateloop.store.dialect import begin_sqlite, configure_sqlite_connection
from stateloop.store.presence import Presence

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")


class Queued(Protocol):
    """A write queued with ``submit_batched``; its outcome is known once ``done()``."""

    def done(self) -> bool: ...

    def exception(self) -> BaseException | None: ...

    def commit_times(self) -> tuple[int, int] | None: ...


class Runner(Protocol):
    """Runs functions of a sync Connection, each inside a transaction. Writes land in the
    order they were made; a read sees every write made before it."""

    async def write(self, fn: Callable[[Connection], T], *, offload: bool = False,
                    raw: bool = False) -> T: ...

    def submit_batched(self, fn: BatchFn, item: Any) -> Queued:
        """Queue ``fn(conn, [item])`` without waiting; it commits at the next turn of the
        event loop (or with the next write or ``barrier``, if a write holds the connection
        then). Consecutive items of one ``fn`` may be written by one call of it; ``fn`` uses
        only the DBAPI connection."""
        ...

    async def barrier(self) -> None:
        """Commit (or fail) everything queued so far."""
        ...

    async def read(self, fn: Callable[[Connection], T]) -> T: ...

    async def close(self) -> None: ...

    def others_alive(self) -> bool:
        """Whether another process (or another store in this one) has the database open."""
        ...

    def announce(self, address: str) -> None:
        """Let other processes on this SQLite file know a server at ``address`` has it open
        (presence.py); nothing on PostgreSQL, where servers share agents."""
        ...

    def blocks_version(self, agent_id: str, max_age: float = 0.0) -> Any:
        """A value that changes when another connection commits a change to the agent's
        blocks (it may change for other commits too), as known at most ``max_age`` seconds
        ago; None if unknown."""
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

    def __init__(self, sync_url: str, path: Path) -> None:
        self.engine = create_engine(
            sync_url, connect_args={"check_same_thread": False}, pool_size=4, max_overflow=4,
            json_deserializer=deepjson.loads)
        _install_sqlite_events(self.engine)
        self._lock = asyncio.Lock()
        self._writer: Connection | None = None
        self._raw: Any = None  # the writer's DBAPI connection, for blocks_version
        self._version: tuple[float, int | None] = (-1e9, None)  # (when read, PRAGMA data_version)
        self._queue = GroupCommit()
        self._presence = Presence(path)

    def _writer_conn(self) -> Connection:
        if self._writer is None:
            self._writer = self.engine.connect().execution_options(stateloop_write=True)
        return self._writer

    def _write_sync(self, fn: Callable[[Connection], T]) -> T:
        conn = self._writer_conn()
        with conn.begin():
            return fn(conn)

    def _write_raw(self, fn: Callable[[Connection], T] | None) -> T:
        """``fn`` (if any) after the queued steps, in one transaction opened on the DBAPI
        connection, without SQLAlchemy's bookkeeping: ``fn`` must use only that."""
        conn = self._writer_conn()
        result: T = self._queue.commit(conn, conn.connection.dbapi_connection, then=fn)
        return result

    async def write(self, fn: Callable[[Connection], T], *, offload: bool = False,
                    raw: bool = False) -> T:
        """Run ``fn`` in one write transaction; ``offload`` for big batches (imports);
        ``raw`` when ``fn`` only touches the DBAPI connection. Queued steps land first."""
        async with self._lock:
            if raw:
                return self._write_raw(fn)
            self._commit_queued()
            if offload:
                return await asyncio.to_thread(self._write_sync, fn)
            return self._write_sync(fn)

    def submit_batched(self, fn: BatchFn, item: Any) -> Queued:
        queued = self._queue.add(fn, item)
        if len(self._queue) == 1:
            asyncio.get_running_loop().call_soon(self._commit_soon)
        return queued

    async def barrier(self) -> None:
        if len(self._queue):
            # The queue commits at this turn's end: the steps of other agents that finish in
            # this turn join the transaction (many agents at once: a few commits, not one each).
            await asyncio.sleep(0)
            if len(self._queue):  # the commit was left to a write holding the lock, or more came
                async with self._lock:
                    self._commit_queued()

    def _commit_soon(self) -> None:
        if not self._lock.locked():  # else the next write or barrier commits the queue
            self._commit_queued()

    def _commit_queued(self) -> None:
        if len(self._queue):
            self._write_raw(None)

    def others_alive(self) -> bool:
        return self._presence.others()

    def announce(self, address: str) -> None:
        self._presence.announce(address)

    def _read_sync(self, fn: Callable[[Connection], T]) -> T:
        with self.engine.connect() as conn, conn.begin():
            return fn(conn)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in a read transaction (a consistent snapshot) off the event loop."""
        await self.barrier()
        return await asyncio.to_thread(self._read_sync, fn)

    def blocks_version(self, agent_id: str, max_age: float = 0.0) -> int | None:
        """SQLite's data_version, which any other connection's commit changes."""
        now = time.monotonic()
        if now - self._version[0] <= max_age:
            return self._version[1]
        if self._lock.locked():  # an offloaded write holds the connection
            return None
        if self._raw is None:
            self._raw = self._writer_conn().connection.dbapi_connection
        version = int(self._raw.execute("PRAGMA data_version").fetchone()[0])
        self._version = (now, version)
        return version

    async def close(self) -> None:
        async with self._lock:
            try:
                self._commit_queued()
            finally:
                self._presence.close()
            if self._writer is not None:
                self._writer.close()
                self._writer = self._raw = None
            self.engine.dispose()


class AsyncRunner:
    """Everything through an AsyncEngine (aiosqlite today; the shape PostgreSQL will use)."""

    def __init__(self, async_url: str, path: Path) -> None:
        from sqlalchemy.ext.asyncio import create_async_engine  # lazy: with the ORM, ~8 MB

        self.async_engine: AsyncEngine = create_async_engine(async_url,
                                                               json_deserializer=deepjson.loads)
        _install_sqlite_events(self.async_engine.sync_engine)
        self._lock = asyncio.Lock()  # SQLite has one writer; queue ours instead of busy-waiting
        self._queued: set[asyncio.Task[Any]] = set()
        self._chains: dict[Any, asyncio.Task[Any]] = {}  # chain -> its last write (batching.py)
        self._presence = Presence(path)

    async def write(self, fn: Callable[[Connection], T], *, offload: bool = False,
                    raw: bool = False) -> T:
        """Run ``fn`` in one write transaction."""
        async with self._lock, self.async_engine.connect() as conn:
            conn = await conn.execution_options(stateloop_write=True)
            async with conn.begin():
                return await conn.run_sync(fn)

    def submit_batched(self, fn: BatchFn, item: Any) -> Queued:
        chain = fn.chain(item)
        task = asyncio.ensure_future(self._write_after(self._chains.get(chain), fn, item))
        self._queued.add(task)
        task.add_done_callback(self._queued.discard)
        if chain is not None:
            self._chains[chain] = task
            task.add_done_callback(lambda done: self._end_chain(chain, done))
        return _TaskOutcome(task)

    async def _write_after(self, before: asyncio.Task[Any] | None, fn: BatchFn,
                           item: Any) -> None:
        """Write ``item`` once the write before it in its chain has landed; if that one
        failed, fail with its error (batching.py)."""
        if before is not None:
            await asyncio.wait([before])
            error = None if before.cancelled() else before.exception()
            if error is not None:
                raise error
        await self.write(lambda conn: fn(conn, [item]))

    def _end_chain(self, chain: Any, done: asyncio.Task[Any]) -> None:
        if self._chains.get(chain) is done:
            del self._chains[chain]

    async def barrier(self) -> None:
        if self._queued:
            await asyncio.wait(list(self._queued))

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in a read transaction."""
        await self.barrier()
        async with self.async_engine.connect() as conn, conn.begin():
            return await conn.run_sync(fn)

    async def close(self) -> None:
        try:
            await self.barrier()
            await self.async_engine.dispose()
        finally:
            self._presence.close()

    def others_alive(self) -> bool:
        return self._presence.others()

    def announce(self, address: str) -> None:
        self._presence.announce(address)

    def blocks_version(self, agent_id: str, max_age: float = 0.0) -> None:
        return None  # no connection to ask without a round trip: callers re-read


class _TaskOutcome:
    """A task seen as a ``Queued`` write."""

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self._task = task

    def done(self) -> bool:
        return self._task.done()

    def exception(self) -> BaseException | None:
        if not self._task.done() or self._task.cancelled():
            return None
        return self._task.exception()

    def commit_times(self) -> tuple[int, int] | None:
        return None  # each write commits on its own here: no group commit to time
