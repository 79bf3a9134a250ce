"""The batch runner: claims the pending requests of message batches (at most
``batch_concurrency`` of a batch at once, across every process serving the database), runs
each as a run of its agent, records how it ended, stops those whose batch was cancelled,
and calls a batch's ``callback_url`` once its last request has ended. Requests a stopped
process left claimed are taken over: run again when it stored no run for them, else ended
as their run did; a callback it was to call is called."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ...persistence import run_status
from ...store.records import BatchRecord, BatchRequestRecord
from ...store.sql import SqlStore
from ..models.responses import iso
from .callbacks import Callbacks

logger = logging.getLogger("stateloop.server")

RECOVER = 2.0  # seconds between looks for requests a stopped process left claimed
INTERRUPTED = "the server running this request stopped before its run ended"


@dataclass(slots=True)
class Outcome:
    """How a request ended: its status, the run it started, that run's stop reason, and
    what went wrong (for a request that failed)."""

    status: str
    run_id: str | None = None
    stop_reason: str | None = None
    error: str | None = None


Started = Callable[[str], Awaitable[None]]
# Run a request: start its run (calling ``started`` with the run's id), wait for its end.
Execute = Callable[[BatchRequestRecord, Started], Awaitable[Outcome]]
Stop = Callable[[BatchRequestRecord], Awaitable[None]]  # cancel the run a request started


def outcome_of_run(run: Any) -> Outcome:
    """The outcome of a request whose run a stopped process left: as the run ended, failed
    when it never did."""
    if run.status in ("created", "running"):
        return Outcome("failed", run.id, "error", INTERRUPTED)
    status = run_status(run.stop_reason)
    return Outcome(status, run.id, run.stop_reason,
                   run.error if status == "failed" else None)


class BatchRunner:
    """Claims batch requests when ``wake`` is called and, on a fleet (where other processes
    add and cancel batches), every ``interval`` seconds; runs each in a task of its own."""

    def __init__(self, store: SqlStore, execute: Execute, stop: Stop, callbacks: Callbacks, *,
                 concurrency: int, interval: float = 1.0) -> None:
        self.store = store
        self.execute = execute
        self.stop = stop
        self.callbacks = callbacks
        self.concurrency = concurrency
        self.interval = interval
        # Claims are marked with the process: on a fleet its connections' name (a process
        # whose name has no connection left is gone), on SQLite one of its own.
        self.owner = (store.fleet.name if store.fleet is not None
                      else f"stateloop:{uuid.uuid4().hex}")
        self._alone = store.fleet is None
        self._recovered_at = -math.inf
        self._running: dict[str, tuple[BatchRequestRecord, asyncio.Task[None]]] = {}
        self._cancelled: set[str] = set()  # requests in flight whose batch was cancelled
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._poll())

    def wake(self) -> None:
        """Look now (a batch was added or cancelled, or a request ended)."""
        self._woken.set()

    async def tick(self) -> int:
        """Stop what was cancelled, then claim and start what may run; how many started."""
        if time.monotonic() - self._recovered_at >= RECOVER and not (
                self._alone and self._recovered_at > -math.inf):  # SQLite: once, at start
            self._recovered_at = time.monotonic()
            await self.recover()
        for request_id in await self.store.cancelled_batch_requests(list(self._running)):
            record = self._running[request_id][0] if request_id in self._running else None
            if record is None or request_id in self._cancelled:
                continue
            self._cancelled.add(request_id)
            if record.run_id is not None:  # else queued behind the agent's runs: stopped
                await self._stop(record)    # as it starts
        claimed = await self.store.claim_batch_requests(self.owner, per_batch=self.concurrency)
        for record in claimed:
            task = asyncio.create_task(self._run(record))
            self._running[record.id] = (record, task)
        return len(claimed)

    async def recover(self) -> int:
        """End the requests whose runs stopped processes left (pending again, if they stored
        none: the next claim runs them), and call the callbacks they left uncalled; how many
        requests were ended here."""
        taken = await self.store.take_orphaned_batch_requests(self.owner)
        for record, run in taken:
            await self._finish(record, outcome_of_run(run))
        for batch in await self.store.take_unsent_batch_callbacks(self.owner):
            await self._call_back(batch)  # completed, its callback not yet called
        return len(taken)

    async def _stop(self, record: BatchRequestRecord) -> None:
        try:
            await self.stop(record)
        except Exception:  # the run ended meanwhile, or its agent went away
            logger.warning("could not cancel run %s of batch %s", record.run_id,
                           record.batch_id, exc_info=True)

    async def _run(self, record: BatchRequestRecord) -> None:
        async def started(run_id: str) -> None:
            record.run_id = run_id
            await self.store.batch_request_started(record.id, run_id)
            if record.id in self._cancelled:  # cancelled while queued behind other runs
                await self._stop(record)

        try:
            outcome = await self.execute(record, started)
        except asyncio.CancelledError:  # server shutdown: a restart takes the request over
            raise
        except Exception as exc:  # refused before its run began (an approval pending, ...)
            outcome = Outcome("failed", record.run_id, "error", str(exc) or type(exc).__name__)
        finally:
            self._running.pop(record.id, None)
            self._cancelled.discard(record.id)
        await self._finish(record, outcome)
        self.wake()  # its batch may run another now

    async def _finish(self, record: BatchRequestRecord, outcome: Outcome) -> None:
        try:
            done = await self.store.finish_batch_request(
                record.id, outcome.status, run_id=outcome.run_id,
                stop_reason=outcome.stop_reason, error=outcome.error, owner=self.owner)
            if done is not None and done.callback_url is not None:
                await self._call_back(done)
        except Exception:
            logger.exception("could not record the end of request %s of batch %s",
                             record.id, record.batch_id)

    async def _call_back(self, batch: BatchRecord) -> None:
        """POST Letta's ``{"job_id", "status", "completed_at"}`` to the batch's callback URL
        and record when, and its answer."""
        assert batch.callback_url is not None
        payload = {"job_id": batch.id, "status": batch.status,
                   "completed_at": iso(batch.completed_at)}
        sent: dict[str, Any] = {"sent_at": time.time()}
        sent.update(await self.callbacks.post(batch.callback_url, payload,
                                              subject=f"batch {batch.id}"))
        await self.store.batch_called_back(batch.id, sent)

    async def _poll(self) -> None:
        while True:
            failed = False
            try:
                await self.tick()
            except Exception:  # the database is away for a moment: try again next round
                logger.exception("could not claim batch requests")
                failed = True
            # Alone on SQLite, every batch is added, cancelled and advanced here, each time
            # with a wake: no look is needed between (and none reads the database).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), None if self._alone and not failed
                                       else self.interval)
            self._woken.clear()

    async def close(self) -> None:
        """Stop looking and stop waiting for runs (their requests stay claimed: the next
        server on the database ends them as their runs ended)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        tasks = [task for _, task in self._running.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
