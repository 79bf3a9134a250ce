"""Runs' streams across server processes sharing one PostgreSQL: the process running a run
writes its frames to the ``run_frames`` table in batches (``FrameLog``), and any process
follows them from a cursor (``follow_stored``) until the stream's end row, or until the run's
row says it ended (its process may have died before writing that row). On SQLite (one
process) frames stay in memory only (runs.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from ...store import NotFoundError, RunRecord
from ...store.run_frames import FrameRow
from .messages import Frame

if TYPE_CHECKING:
    from ...store.sql import SqlStore

logger = logging.getLogger("stateloop.server")

FLUSH_EVERY = 0.05  # seconds a frame waits to be written with the others of that interval
POLL_EVERY = 0.05  # seconds between a reader's looks at the table
PAGE = 500  # frames read at once
KEEP_FOR = 3600.0  # seconds frames are kept after they were written
PRUNE_EVERY = 60.0  # seconds between deletions of older frames (by each writing process)
# A run whose row says it ended this long ago, and whose stream has no end row, never gets
# one: its process stopped first. (Its completed_at is the other process's clock.)
END_GRACE = 2.0
_LIVE = ("created", "running")


class FrameLog:
    """Frames of this process's runs on their way to the store: one task writes what came in
    the last ``FLUSH_EVERY`` seconds in one transaction, at once when a step or a run ends."""

    def __init__(self, store: SqlStore, *, keep: int) -> None:
        self.store = store
        self._keep = keep  # frames kept per run, as in memory
        self._pending: list[FrameRow] = []
        self._wake = asyncio.Event()
        self._urgent = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._pruned = -PRUNE_EVERY  # monotonic time of the last deletion: none yet

    def add(self, run_id: str, frames: Sequence[Frame]) -> None:
        """Queue published frames (numbered already)."""
        self._pending.extend((run_id, frame["seq_id"], frame) for frame in frames)
        self._kick()

    def end(self, run_id: str, last_seq: int) -> None:
        """Queue the row that ends the run's stream, and write now."""
        self._pending.append((run_id, last_seq + 1, None))
        self.flush_soon()

    def flush_soon(self) -> None:
        """Write what is queued now rather than at the end of the interval."""
        self._urgent.set()
        self._kick()

    def _kick(self) -> None:
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not (self._closing and not self._pending):
            await self._wake.wait()
            if not self._closing:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._urgent.wait(), FLUSH_EVERY)
            self._wake.clear()
            self._urgent.clear()
            await self._write()

    async def _write(self) -> None:
        rows, self._pending = self._pending, []
        try:
            await self.store.append_run_frames(rows, keep=self._keep)
            if time.monotonic() - self._pruned > PRUNE_EVERY:
                self._pruned = time.monotonic()
                await self.store.delete_run_frames(before=time.time() - KEEP_FOR)
        except Exception:  # readers elsewhere miss these frames; the run goes on
            logger.exception("could not store %d stream frames of runs", len(rows))

    async def close(self) -> None:
        """Write what is queued, then stop."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task


async def follow_stored(store: SqlStore, run_id: str, after: int = 0, *,
                        ping_interval: float | None = None) -> AsyncIterator[Frame | None]:
    """The run's frames with ``seq_id > after`` from the table, as they come, until its
    stream ends; ``None`` after ``ping_interval`` quiet seconds (the caller sends a ping)."""
    cursor = after
    quiet_since = time.monotonic()
    while True:
        page = await store.read_run_frames(run_id, cursor, limit=PAGE)
        for seq, frame in page.frames:
            if frame is None:
                return
            cursor = seq
            yield frame
        if page.frames:
            quiet_since = time.monotonic()
            if len(page.frames) == PAGE:
                continue
        elif page.status is None:
            return  # the run was deleted
        elif page.status not in _LIVE and (
                page.completed_at is None or time.time() - page.completed_at > END_GRACE):
            try:
                run = await store.get_run(run_id)
            except NotFoundError:
                return
            for end in stored_end(run):
                yield end
            return
        if ping_interval is not None and time.monotonic() - quiet_since >= ping_interval:
            quiet_since = time.monotonic()
            yield None
        await asyncio.sleep(POLL_EVERY)


def stored_end(run: RunRecord) -> list[Frame]:
    """The end of a finished run's stream as its row tells it: stop reason and usage."""
    return [{"message_type": "stop_reason", "stop_reason": run.stop_reason or "error"},
            {"message_type": "usage_statistics", "completion_tokens": run.usage.output_tokens,
             "prompt_tokens": run.usage.input_tokens, "total_tokens": run.usage.total_tokens,
             "step_count": run.step_count, "run_ids": [run.id]}]
