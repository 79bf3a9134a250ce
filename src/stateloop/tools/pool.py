"""Warm sandboxed workers, kept per bound tool.

A ``Slot`` is one tool bound for one agent: its source, its limits and that agent's
environment. Its workers serve its calls only, so a worker never holds another tool's code
nor another agent's secrets; two agents with the same tool and the same variables still get
workers of their own. Each call is a fresh fork of the worker's zygote, and the zygote kills
what the call left running and empties /tmp before the next, so calls see the same clean
state (what else a call could leave in its sandbox, a SysV IPC object, reaches only later
calls of the same tool for the same agent).

A worker is started by the first call that needs one (binding a tool runs none of its
code: an agent loaded but never calling it holds no process), and after every worker lost to
a timeout, an output flood, a crash or a cancellation. Idle workers are bounded in number
(the least recently used goes first) and in idle time, and stopped when their tool is
dropped (its agent deleted or unloaded, the tool rebound): at once if idle or starting, at
the end of its call if busy. ``close`` kills them all, and those busy or starting too.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

from .worker import Worker, WorkerFailed, WorkerGone, WorkerSpec


class Slot:
    """The workers of one bound tool."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.idle: list[Worker] = []
        self.starting: asyncio.Task[Worker] | None = None
        self.dropped = False  # its workers stop after their calls


class WorkerPool:
    """Workers for the source tools of one server (or any caller that closes it)."""

    def __init__(self, *, max_idle: int = 16, idle_seconds: float = 300.0) -> None:
        self.max_idle = max_idle
        self.idle_seconds = idle_seconds
        self._idle: collections.OrderedDict[Worker, tuple[Slot, asyncio.TimerHandle]] = (
            collections.OrderedDict())
        self._busy: set[Worker] = set()
        self._starting: set[asyncio.Task[Worker]] = set()
        self._reaping: set[asyncio.Task[None]] = set()
        self._closed = False

    def slot(self, spec: WorkerSpec) -> Slot:
        """A slot of its own for one bound tool; its first call starts its first worker."""
        return Slot(spec)

    def drop(self, slot: Slot) -> None:
        """The slot's tool is gone (rebound, or its agent dropped): stop its idle and
        starting workers now, its busy ones when their calls end."""
        slot.dropped = True
        if slot.starting is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nothing runs
                slot.starting.cancel()
            slot.starting = None
        while slot.idle:
            worker = slot.idle.pop()
            if (kept := self._idle.pop(worker, None)) is not None:
                kept[1].cancel()
            self._reap(worker)

    def counts(self) -> tuple[int, int]:
        """How many workers are live: idle (warm, waiting for a call) and busy."""
        return len(self._idle), len(self._busy)

    def pids(self) -> list[int]:
        """The process ids of every worker started and not yet reaped."""
        return [worker.pid for worker in [*self._idle, *self._busy]]

    async def call(self, slot: Slot, arguments: dict[str, Any]) -> dict[str, Any]:
        """The reply of one call on a worker of ``slot``; a worker found dead (killed while
        idle) is replaced and the call, which never reached it, goes to the new one."""
        for attempt in (1, 2):
            try:
                worker = await self._acquire(slot)
            except WorkerFailed as exc:
                return {"ok": False, "error_type": exc.error_type, "message": str(exc)}
            self._busy.add(worker)
            try:
                return await worker.call(arguments)
            except WorkerGone as exc:
                if attempt == 2:
                    return {"ok": False, "error_type": exc.error_type, "message": str(exc)}
            finally:
                self._busy.discard(worker)
                self._release(slot, worker)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Stop every worker (idle ones close, busy and starting ones are killed) and reap
        them all."""
        self._closed = True
        for task in self._starting:
            task.cancel()  # a start cancelled kills what it started
        for worker in self._busy:
            worker.kill()
        workers = [*self._idle, *self._busy]
        for slot, timer in self._idle.values():
            timer.cancel()
            slot.idle.clear()
        self._idle.clear()
        self._busy.clear()
        await asyncio.gather(*(worker.close() for worker in workers),
                             *self._starting, *self._reaping, return_exceptions=True)

    async def _acquire(self, slot: Slot) -> Worker:
        while slot.idle:
            worker = slot.idle.pop()
            self._idle.pop(worker)[1].cancel()
            if worker.process.returncode is None:
                return worker
            self._reap(worker)  # died while idle (killed from outside): take another
        task, slot.starting = slot.starting or self._start(slot), None
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(lambda done: self._settle(slot, done))
            raise

    def _prestart(self, slot: Slot) -> None:
        if not self._closed and not slot.dropped and slot.starting is None and not slot.idle:
            task = slot.starting = self._start(slot)
            task.add_done_callback(lambda done: self._settle(slot, done, prestarted=True))

    def _start(self, slot: Slot) -> asyncio.Task[Worker]:
        task = asyncio.ensure_future(Worker.start(slot.spec))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)
        return task

    def _settle(self, slot: Slot, task: asyncio.Task[Worker], prestarted: bool = False) -> None:
        """A start finished that no call is waiting for: keep its worker idle."""
        if prestarted:
            if slot.starting is not task:
                return  # a call took it over
            slot.starting = None
        if not task.cancelled() and task.exception() is None:
            self._release(slot, task.result())

    def _release(self, slot: Slot, worker: Worker) -> None:
        if (worker.dead or worker.process.returncode is not None or self._closed
                or slot.dropped):
            self._reap(worker)
            if not self._closed:
                self._prestart(slot)  # its replacement, ready for the next call
            return
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.idle_seconds, self._expire, slot, worker)
        slot.idle.append(worker)
        self._idle[worker] = (slot, timer)
        while len(self._idle) > self.max_idle:
            oldest, (owner, old_timer) = self._idle.popitem(last=False)
            old_timer.cancel()
            owner.idle.remove(oldest)
            self._reap(oldest)

    def _expire(self, slot: Slot, worker: Worker) -> None:
        if self._idle.pop(worker, None) is not None:
            slot.idle.remove(worker)
            self._reap(worker)

    def _reap(self, worker: Worker) -> None:
        try:
            task = asyncio.ensure_future(worker.close())
        except RuntimeError:  # no running loop (the tool collected late): killed is enough
            worker.kill()
            return
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)
