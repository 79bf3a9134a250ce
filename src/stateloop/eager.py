"""Awaiting without the event loop when nothing waits.

Much of what a step awaits usually finishes at once: a tool that only computes, the write
queued at a run's end. Running a coroutine's first step inline, and handing on only a
coroutine that really suspends, saves the task or timer each would otherwise cost.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
from typing import Any


def first_step(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """Run ``coro`` until it first suspends: ``(True, its value)`` when it finished, else
    ``(False, an awaitable of the rest)``. An exception it raises propagates."""
    try:
        waiting = coro.send(None)
    except StopIteration as done:
        return True, done.value
    return False, _resumed(coro, waiting)


async def shielded(coro: Coroutine[Any, Any, Any]) -> Any:
    """``await asyncio.shield(coro)``, with no task when ``coro`` finishes without suspending."""
    finished, value = first_step(coro)
    return value if finished else await asyncio.shield(_awaited(value))


async def _awaited(awaitable: Any) -> Any:
    return await awaitable  # a native coroutine, which any asyncio version makes a task of


@types.coroutine
def _resumed(coro: Coroutine[Any, Any, Any], waiting: Any) -> Generator[Any, Any, Any]:
    """Await ``coro``, whose first step already ran and left it waiting on ``waiting``:
    what ``yield from`` does, one step late. A cancel is thrown into ``coro``, as ``await``
    would."""
    while True:
        try:
            sent = yield waiting
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                waiting = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                waiting = coro.send(sent)
            except StopIteration as done:
                return done.value

