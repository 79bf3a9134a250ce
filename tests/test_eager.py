"""Coroutines run inline until they suspend (stateloop.eager)."""

from __future__ import annotations

import asyncio

import pytest

from stateloop.eager import first_step, shielded


async def test_a_coroutine_that_never_suspends_finishes_in_its_first_step() -> None:
    async def compute() -> int:
        return 42

    assert first_step(compute()) == (True, 42)


async def test_a_suspended_coroutine_is_handed_on_and_finishes_when_awaited() -> None:
    steps: list[str] = []

    async def wait_twice() -> str:
        steps.append("first")
        await asyncio.sleep(0)
        steps.append("second")
        await asyncio.sleep(0.01)
        return "done"

    finished, rest = first_step(wait_twice())
    assert not finished and steps == ["first"]
    assert await rest == "done" and steps == ["first", "second"]


async def test_errors_propagate_before_and_after_the_first_suspension() -> None:
    async def fail_at_once() -> None:
        raise ValueError("at once")

    async def fail_later() -> None:
        await asyncio.sleep(0)
        raise KeyError("later")

    with pytest.raises(ValueError, match="at once"):
        first_step(fail_at_once())
    finished, rest = first_step(fail_later())
    assert not finished
    with pytest.raises(KeyError, match="later"):
        await rest


async def test_shielded_runs_inline_in_the_callers_task_when_nothing_waits() -> None:
    async def which_task() -> asyncio.Task | None:
        return asyncio.current_task()

    assert await shielded(which_task()) is asyncio.current_task()


async def test_shielded_work_goes_on_when_its_caller_is_cancelled() -> None:
    log: list[str] = []

    async def write() -> None:
        log.append("started")
        await asyncio.sleep(0.05)
        log.append("landed")

    caller = asyncio.create_task(shielded(write()))
    await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.sleep(0.1)
    assert log == ["started", "landed"]
