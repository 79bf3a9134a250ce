"""The scheduler: scheduled messages fire when due, each due time once across every process
serving the database, then move to their next time (a cron schedule's next time after the
firing, so one missed while no process ran fires once, not once per missed minute). What a
firing does is given to it: the server sends an async message, the library runs its agent."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable

from .cron import next_time
from .store.records import ScheduleRecord
from .store.sql import SqlStore

logger = logging.getLogger("stateloop")

Fire = Callable[[ScheduleRecord], Awaitable[None]]
RECOVER = 2.0  # seconds between looks for firings a stopped process left unfinished
CLAIMS = 10  # due schedules claimed in one transaction (then more at once): a fleet shares them


class Scheduler:
    """Claims due schedules every ``interval`` seconds (and when ``wake`` is called) and
    hands each to ``fire``, in a task of its own. ``clock`` is the time the scheduler goes
    by (seconds since the epoch): a test may move it."""

    def __init__(self, store: SqlStore, fire: Fire, *, interval: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.fire = fire
        self.interval = interval
        self.clock = clock
        # Claims are marked with the process: on a fleet its connections' name (a process
        # whose name has no connection left is gone), on SQLite one of its own.
        self.owner = (store.fleet.name if store.fleet is not None
                      else f"stateloop:{uuid.uuid4().hex}")
        self._recovered_at = -math.inf
        # Alone on its database (SQLite: one server holds the file), only this process adds
        # schedules and moves them, so the earliest due time read last stays true until
        # ``wake`` or a claim: with none due, a look reads nothing.
        self._alone = store.fleet is None
        self._due: float | None = None
        self._due_known = False
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._firing: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._poll())

    def wake(self) -> None:
        """Look for due schedules now (one was added, or the clock was moved)."""
        self._due_known = False
        self._woken.set()

    async def tick(self) -> int:
        """Fire what is due now; how many were claimed. With nothing due it is one read of
        an index (off the event loop), no write; alone on SQLite, not even that until a
        schedule is added or the earliest known one comes due."""
        if time.monotonic() - self._recovered_at >= RECOVER and not (
                self._alone and self._recovered_at > -math.inf):  # SQLite: once, at start
            self._recovered_at = time.monotonic()
            await self.recover()
        now = self.clock()
        if self._alone and self._due_known and (self._due is None or self._due > now):
            return 0
        due = self._due = await self.store.next_schedule_due()
        self._due_known = True
        if due is None or due > now:
            return 0
        self._due_known = False  # the claims move the due times
        claimed = await self.store.claim_due_schedules(now, next_time, self.owner,
                                                       limit=CLAIMS)
        for record in claimed:
            self._start(record)
        return len(claimed)

    async def recover(self) -> int:
        """Finish the firings of processes that died between claiming a schedule and storing
        its run: fired again when no run was stored for it, else marked fired. How many."""
        taken = await self.store.take_orphaned_claims(self.owner)
        for record, run_id in taken:
            if run_id is not None:
                await self.store.schedule_fired(record.id, run_id)
            else:
                logger.info("scheduled message %s: firing it for a process that stopped",
                            record.id)
                self._start(record)
        return len(taken)

    def _start(self, record: ScheduleRecord) -> None:
        task = asyncio.create_task(self._fire(record))
        self._firing.add(task)
        task.add_done_callback(self._firing.discard)

    async def _fire(self, record: ScheduleRecord) -> None:
        try:
            await self.fire(record)
        except Exception as exc:  # the agent was deleted, its input no longer fits, ...
            logger.warning("scheduled message %s for agent %s did not start: %s",
                           record.id, record.agent_id, exc)
            with contextlib.suppress(Exception):  # its claim ends; the row may be gone
                await self.store.schedule_fired(record.id, None)

    async def drain(self) -> None:
        """Wait for the firings started so far to end."""
        await asyncio.gather(*self._firing, return_exceptions=True)

    async def _poll(self) -> None:
        while True:
            try:
                if await self.tick() >= CLAIMS:
                    continue  # more are due: claim them without waiting
            except Exception:  # the database is away for a moment: try again next round
                logger.exception("could not claim due scheduled messages")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.interval)
            self._woken.clear()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._firing):
            task.cancel()
        await asyncio.gather(*self._firing, return_exceptions=True)
