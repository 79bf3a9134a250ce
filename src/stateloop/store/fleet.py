"""Several processes on one PostgreSQL: whose turn it is to run an agent, and word between them.

Turns. A run of an agent thread (the agent's own, or one conversation) takes a ticket when it
arrives: a row in ``fleet_tickets`` numbered by a sequence, so tickets order the sends of every
process by arrival. The run goes when its ticket is the thread's lowest; leaving deletes the
ticket and bumps the agent's version in ``fleet_versions``, in one transaction, and tells the
waiting processes with NOTIFY (a waiter also looks again every ``POLL`` seconds, so a lost
notice only costs time). A thread whose version moved since this store last held it was run
or changed elsewhere: the agent reads it again before its run (``Turn.stale``).

A ticket lives as long as its process: processes are told apart by their connections'
application name (postgres.py), so a ticket whose owner has no connection left belongs to a
dead process. Every store sweeps for those; a dead owner's tickets go, its runs in flight end
failed, and the versions of its agents move, so the next run repairs the transcript.

Word. ``send`` publishes a small JSON message (cancel, steer, "agent changed") on one channel
every process listens to; ``subscribe`` hands them to the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, text

from stateloop.errors import AgentBusyError
from stateloop.store.postgres import BLOCK_VERSION_OF

if TYPE_CHECKING:
    from stateloop.store.postgres import PostgresRunner

logger = logging.getLogger("stateloop.store")
T = TypeVar("T")

CHANNEL = "stateloop_fleet"
POLL = 1.0  # seconds a waiter sleeps when no notice comes
SWEEP = 1.0  # seconds between looks for dead processes
NOTIFY_LIMIT = 7900  # bytes: PostgreSQL refuses a NOTIFY payload of 8000 or more
INTERRUPTED = "interrupted: the process running it stopped before the run finished"

Key = tuple[str, str | None]  # (agent id, conversation id or None for the agent's own thread)

# The ticket a request took as it arrived (the server takes one before loading the agent):
# the run the request starts goes with it instead of taking its own, later one.
arrived: ContextVar[Turn | None] = ContextVar("arrived", default=None)

_THREAD = "agent_id = :agent AND conversation_id IS NOT DISTINCT FROM :conversation"
# Tickets are written on a connection of their own, from the event loop: a busy process
# numbers a request as soon as it reads it, not when a thread or a pooled connection frees.
_ENTER_RAW = ("INSERT INTO fleet_tickets (agent_id, conversation_id, owner, created_at) "
              "VALUES (%s, %s, %s, %s) RETURNING ticket")
# The thread's first ticket, the agent's version, and its blocks' (postgres.py): a run whose
# turn comes knows at once whether its blocks changed, without reading them.
_HEAD = text(f"SELECT ticket, (SELECT version FROM fleet_versions WHERE agent_id = :agent), "
             f"{BLOCK_VERSION_OF} FROM fleet_tickets WHERE {_THREAD} ORDER BY ticket LIMIT 1")
_HOLDER = text(f"SELECT owner FROM fleet_tickets WHERE {_THREAD} ORDER BY ticket LIMIT 1")
_BUMP = text("INSERT INTO fleet_versions (agent_id, version) VALUES (:agent, 1) "
             "ON CONFLICT (agent_id) DO UPDATE SET version = fleet_versions.version + 1 "
             "RETURNING version")
_NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', :payload)")
# Leaving a turn in one statement (one round trip): the ticket goes, the agent's version moves
# when the turn was held (its new value returned), and the waiting processes are told.
_LEAVE = text("WITH dropped AS (DELETE FROM fleet_tickets WHERE ticket = :ticket), "
              "bumped AS (INSERT INTO fleet_versions (agent_id, version) "
              "SELECT CAST(:agent AS VARCHAR), 1 WHERE :bump ON CONFLICT (agent_id) "
              "DO UPDATE SET version = fleet_versions.version + 1 RETURNING version) "
              f"SELECT (SELECT version FROM bumped), pg_notify('{CHANNEL}', :payload)")
_DEAD = text("SELECT DISTINCT owner FROM fleet_tickets WHERE owner NOT IN (SELECT "
             "application_name FROM pg_stat_activity WHERE application_name IS NOT NULL)")
_DEAD_TICKETS = text("DELETE FROM fleet_tickets WHERE owner = ANY(:owners) "
                     "RETURNING agent_id, conversation_id")
_FAIL_RUNS = text("UPDATE runs SET status = 'failed', stop_reason = 'error', error = :error, "
                  "completed_at = :now WHERE agent_id = :agent AND status IN "
                  "('created', 'running') AND (metadata ->> 'conversation_id') "
                  "IS NOT DISTINCT FROM :conversation RETURNING id")


@dataclass(slots=True)
class Turn:
    """A ticket for one thread's run; ``stale`` once it is the thread's turn."""

    ticket: int
    agent_id: str
    conversation_id: str | None
    version: int = 0
    stale: bool = False
    held: bool = False  # its turn came
    waited: bool = False  # another run's turn came first
    claimed: bool = False  # a run took it (see ``arrived``)
    left: bool = False

    @property
    def key(self) -> Key:
        return self.agent_id, self.conversation_id


class Fleet:
    """Turns and word for one store; the listening connection opens at first use."""

    def __init__(self, runner: PostgresRunner) -> None:
        self._runner = runner
        self.name = runner.name
        self._seen: dict[Key, int] = {}  # the agent's version when this store last had the turn
        self._wakers: dict[Key, set[asyncio.Event]] = {}
        self._handlers: list[Callable[[dict[str, Any]], None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._listening: asyncio.Event | None = None
        self._suspects: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tickets: Any = None  # psycopg.AsyncConnection, opened at the first ticket
        self._ticketing = asyncio.Lock()
        # Threads of their own: a ticket is not queued behind the store's reads.
        self._executor = ThreadPoolExecutor(4, thread_name_prefix="stateloop-fleet")

    # -- turns ---------------------------------------------------------------------------

    async def enter(self, agent_id: str, conversation_id: str | None) -> Turn:
        """A ticket for a run of this thread, numbered by arrival."""
        await self.start()
        params = (agent_id, conversation_id, self.name, time.time())
        async with self._ticketing:  # one statement at a time on the connection
            for attempt in (1, 2):
                try:
                    if self._tickets is None or self._tickets.closed:
                        self._tickets = await self._connect()
                    row = await (await self._tickets.execute(_ENTER_RAW, params)).fetchone()
                    break
                except Exception:
                    if self._tickets is not None:
                        await self._tickets.close()
                    self._tickets = None
                    if attempt == 2:
                        raise
        assert row is not None
        return Turn(row[0], agent_id, conversation_id)

    async def _connect(self) -> Any:
        import psycopg  # lazy: optional: the PostgreSQL driver

        return await psycopg.AsyncConnection.connect(**self._runner.connect_params(),
                                                     autocommit=True)

    def claim(self, agent_id: str, conversation_id: str | None) -> Turn | None:
        """The ticket this request took on arrival for this thread, if it has one unused."""
        turn = arrived.get()
        if turn is None or turn.claimed or turn.left or turn.key != (agent_id, conversation_id):
            return None
        turn.claimed = True
        return turn

    async def wait(self, turn: Turn, *, reject: bool = False) -> None:
        """Return when ``turn`` is the thread's; ``reject``: raise ``AgentBusyError`` (and
        give the ticket up) if another run is ahead instead."""
        waker = asyncio.Event()  # one per waiter: clearing it loses no other's notice
        wakers = self._wakers.setdefault(turn.key, set())
        wakers.add(waker)
        params = {"agent": turn.agent_id, "conversation": turn.conversation_id}
        try:
            while True:
                waker.clear()  # before looking: a notice that comes after is not missed
                head, version, blocks = (await self._now(
                    lambda conn: conn.execute(_HEAD, params).one()))
                if head == turn.ticket:
                    break
                turn.waited = True
                if reject:
                    await self.leave(turn)
                    raise AgentBusyError(f"agent {turn.agent_id!r} is running in another "
                                         "process; try again when its run ends")
                try:
                    await asyncio.wait_for(waker.wait(), POLL)
                except TimeoutError:
                    pass
        finally:
            wakers.discard(waker)
            if not wakers:
                self._wakers.pop(turn.key, None)
        turn.version, turn.held = version or 0, True
        self._runner.turn_began(turn.agent_id, blocks)
        turn.stale = self._seen.get(turn.key) != turn.version
        self._seen[turn.key] = turn.version

    async def leave(self, turn: Turn) -> None:
        """Give the ticket up: the next one's turn comes. A turn that was held moves the
        agent's version (its run may have changed the agent)."""
        if turn.left:
            return
        turn.left, bump = True, turn.held
        payload = json.dumps({"op": "turn", "agent_id": turn.agent_id,
                              "conversation_id": turn.conversation_id, "owner": self.name})

        params = {"ticket": turn.ticket, "agent": turn.agent_id, "bump": bump,
                  "payload": payload}
        version: int | None = await self._now(
            lambda conn: conn.execute(_LEAVE, params).scalar())
        if version is not None:
            self._moved(turn.agent_id, turn.version, version)

    async def holder(self, agent_id: str, conversation_id: str | None) -> str | None:
        """The process whose turn it is in this thread (its run in flight), if any."""
        params = {"agent": agent_id, "conversation": conversation_id}
        owner: str | None = await self._now(
            lambda conn: conn.execute(_HOLDER, params).scalar())
        return owner

    async def touch(self, agent_id: str) -> None:
        """The agent was changed outside a run: other processes read it again."""
        await self.start()
        payload = json.dumps({"op": "changed", "agent_id": agent_id, "owner": self.name})

        def txn(conn: Connection) -> int:
            version: int = conn.execute(_BUMP, {"agent": agent_id}).scalar_one()
            conn.execute(_NOTIFY, {"payload": payload})
            return version

        version = await self._now(txn)
        self._moved(agent_id, version - 1, version)

    def _moved(self, agent_id: str, before: int, after: int) -> None:
        """This store moved the agent's version: threads that were up to date stay so (if
        nobody else moved it in between)."""
        if after != before + 1:
            return
        for key, seen in self._seen.items():
            if key[0] == agent_id and seen == before:
                self._seen[key] = after

    async def _now(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in a transaction of its own on a pooled connection, at once: not behind
        the writer's queued steps (a ticket's number is its arrival; a turn left is the
        next one's start). What a turn's run wrote has committed before it is left."""
        def txn() -> T:
            with self._runner.engine.begin() as conn:
                return fn(conn)

        return await asyncio.get_running_loop().run_in_executor(self._executor, txn)

    # -- word ----------------------------------------------------------------------------

    def subscribe(self, handler: Callable[[dict[str, Any]], None]) -> None:
        """Call ``handler`` with every message another process sends."""
        self._handlers.append(handler)

    async def send(self, message: dict[str, Any]) -> None:
        """Publish ``message`` (JSON, under ~7.9 KB: else ``ValueError``) to every process
        (or, with ``"to": name``, to that one)."""
        payload = json.dumps({**message, "owner": self.name})
        if len(payload.encode()) > NOTIFY_LIMIT:
            raise ValueError(f"the message is {len(payload.encode())} bytes; at most "
                             f"{NOTIFY_LIMIT} reach another process")
        await self.start()
        await self._now(lambda conn: conn.execute(_NOTIFY, {"payload": payload}))

    def _dispatch(self, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            return
        if message.get("op") == "turn":
            key = (message["agent_id"], message.get("conversation_id"))
            for waker in self._wakers.get(key, ()):
                waker.set()
            return
        if message.get("owner") == self.name or message.get("to", self.name) != self.name:
            return
        for handler in self._handlers:
            try:
                handler(message)
            except Exception:
                logger.exception("fleet message %r", message)

    # -- the listening connection and the sweep ------------------------------------------

    async def start(self) -> None:
        """Listen, and sweep for dead processes, from now until ``close``."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # first use, or the store outlived its event loop
            self._loop, self._listening, self._wakers = loop, None, {}
            self._tickets, self._ticketing = None, asyncio.Lock()
        if self._listening is None:
            self._listening = asyncio.Event()
            self._tasks = [asyncio.create_task(self._listen()),
                           asyncio.create_task(self._sweep())]
        await self._listening.wait()

    async def _listen(self) -> None:

        assert self._listening is not None
        while True:
            try:
                async with await self._connect() as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._listening.set()
                    for wakers in self._wakers.values():  # notices may have been missed
                        for waker in wakers:               # while reconnecting
                            waker.set()
                    async for notice in conn.notifies():
                        self._dispatch(notice.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("fleet: the listening connection failed (%s); reconnecting", exc)
                self._listening.set()  # waiters poll meanwhile
                await asyncio.sleep(POLL)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP)
            try:
                await self.reap()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("fleet: looking for dead processes failed: %s", exc)

    async def reap(self) -> list[str]:
        """End what dead processes left: their tickets, their runs in flight (failed); the
        ids of those runs. A process is dead when it is seen without a connection twice in a
        row (a reconnecting process is not)."""
        dead = set(await self._now(lambda conn: conn.execute(_DEAD).scalars().all()))
        gone, self._suspects = dead & self._suspects, dead - self._suspects
        if not gone:
            return []

        def txn(conn: Connection) -> list[str]:
            failed: list[str] = []
            now = time.time()
            dropped = conn.execute(_DEAD_TICKETS, {"owners": list(gone)})
            threads = {(row[0], row[1]) for row in dropped}
            for agent_id, conversation_id in threads:
                failed += conn.execute(_FAIL_RUNS, {
                    "agent": agent_id, "conversation": conversation_id, "error": INTERRUPTED,
                    "now": now}).scalars()
                conn.execute(_BUMP, {"agent": agent_id})
                conn.execute(_NOTIFY, {"payload": json.dumps({
                    "op": "turn", "agent_id": agent_id, "conversation_id": conversation_id})})
            return failed

        failed = await self._now(txn)
        logger.warning("fleet: process(es) %s stopped; runs %s ended failed",
                       ", ".join(sorted(gone)), ", ".join(failed) or "(none)")
        return failed

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self._executor.shutdown(wait=True)
        tickets, self._tickets = self._tickets, None
        if tickets is not None:
            with contextlib.suppress(Exception):  # opened in an event loop now gone, say
                await tickets.close()
