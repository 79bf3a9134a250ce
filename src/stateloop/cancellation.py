"""Cancelling a run from another task, another thread, or a timer."""

from __future__ import annotations

import asyncio
from typing import Any

from .events import StopReason


class CancelScope:
    """Cancels a run from anywhere: another task, another thread, or a timer.

    The loop "arms" the scope only while it awaits a model chunk, a tool batch or a retry
    delay; a cancel then interrupts that await at once. Otherwise the loop sees the flag
    at its next check, so the consumer's own code is never interrupted.
    """

    __slots__ = ("_armed", "_fired", "_loop", "_task", "reason")

    def __init__(self) -> None:
        self.reason: StopReason | None = None
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._armed = False
        self._fired = False

    def cancel(self, reason: StopReason = "cancelled") -> None:
        """Ask the run to stop with ``reason``; safe to call from any thread, and more than once."""
        if self.reason is None:
            self.reason = reason
        loop = self._loop
        if loop is None:
            return
        try:
            same_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            same_loop = False
        if same_loop:
            self._interrupt()
        else:
            loop.call_soon_threadsafe(self._interrupt)

    def _interrupt(self) -> None:
        if self._armed and not self._fired and self._task is not None:
            self._fired = True
            self._task.cancel()

    def bind(self) -> None:
        self._task = asyncio.current_task()
        self._loop = asyncio.get_running_loop()

    def absorb(self) -> bool:
        """After a CancelledError: True when it came from this scope alone (the run goes on
        to a clean stop); False when the task itself is being cancelled."""
        if not self._fired or self._task is None:
            return False
        self._fired = False
        return self._task.uncancel() == 0
