"""Warm workers: binding a tool starts none; calls of one bound tool reuse its worker, each
from the same clean state; a worker lost to a kill, a crash or a timeout is replaced; idle
workers are bounded and stopped with their tool; closing the pool leaves no process. Real
bubblewrap throughout."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

from stateloop.tools.pool import Slot, WorkerPool
from stateloop.tools.sandbox import Isolation, SandboxLimits, sandboxed_tool, stop_workers
from stateloop.tools.worker import CHILD_SCRIPT, WorkerSpec

LIMITS = SandboxLimits(timeout=4.0, memory_mb=256, processes=16)
# The module code runs once per worker: its token names the worker; COUNT shows whether a
# call saw what an earlier call did.
SOURCE = """
import os, subprocess
TOKEN = os.urandom(8).hex()
COUNT = 0

def probe(action: str = "", marker: str = "") -> str:
    global COUNT
    COUNT += 1
    seen = sorted(os.listdir("/tmp"))
    if action == "write":
        open("/tmp/left-behind", "w").write("x")
    elif action == "spawn":
        subprocess.Popen(["sleep", marker], start_new_session=True)
    elif action == "kill-zygote":
        os.kill(os.getppid(), 9)
    elif action == "hang":
        while True:
            pass
    return f"{TOKEN} {COUNT} {','.join(seen)} {os.environ.get('SECRET')}"
"""


def _slot(pool: WorkerPool, limits: SandboxLimits = LIMITS, **env: str) -> Slot:
    return pool.slot(WorkerSpec(SOURCE, "probe", limits, Isolation(env=env)))


async def _probe(pool: WorkerPool, slot: Slot, **arguments: Any) -> list[str]:
    reply = await pool.call(slot, arguments)
    assert reply["ok"], reply
    return str(reply["result"]).split(" ")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _with_in_cmdline(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def _until(condition: Any, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_calls_of_one_tool_reuse_its_worker_from_a_clean_state() -> None:
    pool = WorkerPool()
    marker = f"60.{uuid.uuid4().int % 10**12:012d}"
    try:
        slot = _slot(pool, SECRET="one")
        token, count, _, secret = await _probe(pool, slot, action="write")
        workers = pool.pids()
        again, count_again, seen_again, _ = await _probe(pool, slot, action="spawn",
                                                         marker=marker)
        assert again == token and pool.pids() == workers and len(workers) == 1
        assert (count, count_again) == ("1", "1")  # each call forks the same loaded state
        assert "left-behind" not in seen_again.split(",")  # /tmp was emptied after the call
        assert secret == "one"
        assert not _with_in_cmdline(marker)  # what a call started ended with it
        assert (await _probe(pool, slot))[0] == token
    finally:
        await pool.close()
        for pid in _with_in_cmdline(marker):
            os.kill(pid, signal.SIGKILL)


async def test_workers_are_not_shared_across_bound_tools() -> None:
    pool = WorkerPool()
    try:
        one, two, same = _slot(pool, SECRET="one"), _slot(pool, SECRET="two"), _slot(pool)
        plain = _slot(pool)  # the same tool and variables, bound again (another agent)
        tokens = {name: (await _probe(pool, slot))[0]
                  for name, slot in (("one", one), ("two", two), ("same", same),
                                     ("plain", plain))}
        assert len(set(tokens.values())) == 4
        assert len(pool.pids()) == 4
        assert (await _probe(pool, one))[3] == "one" and (await _probe(pool, two))[3] == "two"
    finally:
        await pool.close()


async def test_a_worker_killed_while_idle_is_replaced_and_the_call_answers() -> None:
    pool = WorkerPool()
    try:
        slot = _slot(pool)
        token = (await _probe(pool, slot))[0]
        [pid] = pool.pids()
        os.killpg(pid, signal.SIGKILL)
        assert await _until(lambda: not _alive(pid))
        replaced = (await _probe(pool, slot))[0]  # never reached the dead one: it ran anew
        assert replaced != token and pid not in pool.pids()
    finally:
        await pool.close()


async def test_a_call_that_kills_its_worker_leaves_the_next_call_a_fresh_one() -> None:
    pool = WorkerPool()
    try:
        slot = _slot(pool)
        token = (await _probe(pool, slot))[0]
        [pid] = pool.pids()
        reply = await pool.call(slot, {"action": "kill-zygote"})
        # Its reply may have left before the sandbox went down with the zygote.
        assert reply["ok"] or reply["error_type"] == "ToolCrashed", reply
        assert (await _probe(pool, slot))[0] != token
        assert await _until(lambda: not _alive(pid))
    finally:
        await pool.close()


async def test_a_timed_out_call_takes_its_worker_and_a_fresh_one_follows() -> None:
    pool = WorkerPool()
    try:
        # The timeout bounds a worker's start too: short enough to wait out, long enough
        # for a start on a busy machine.
        slot = _slot(pool, SandboxLimits(timeout=3.0, memory_mb=256, processes=16))
        token = (await _probe(pool, slot))[0]
        [pid] = pool.pids()
        reply = await pool.call(slot, {"action": "hang"})
        assert reply["error_type"] == "TimeoutError", reply
        assert await _until(lambda: not _alive(pid))
        assert (await _probe(pool, slot))[0] != token
    finally:
        await pool.close()


async def test_idle_workers_are_bounded_in_number_and_time() -> None:
    pool = WorkerPool(max_idle=1, idle_seconds=0.5)
    try:
        first, second = _slot(pool), _slot(pool)
        await _probe(pool, first)
        [older] = pool.pids()
        await _probe(pool, second)
        assert await _until(lambda: not _alive(older))  # the least recently used went
        [newer] = pool.pids()
        assert await _until(lambda: not pool.pids() and not _alive(newer))  # idle too long
    finally:
        await pool.close()


async def test_a_dropped_tool_stops_its_workers() -> None:
    pool = WorkerPool()
    try:
        tool = sandboxed_tool(SOURCE, {"name": "probe", "parameters": {
            "type": "object", "properties": {"action": {}, "marker": {}}}},
            limits=LIMITS, pool=pool)
        assert tool.function is not None
        await tool.function()
        [pid] = pool.pids()
        del tool
        gc.collect()
        assert await _until(lambda: not _alive(pid) and not pool.pids())
    finally:
        await pool.close()


async def test_closing_the_pool_leaves_no_process() -> None:
    earlier = set(_with_in_cmdline(CHILD_SCRIPT))  # sandboxes of earlier tests, still ending
    pool = WorkerPool()
    idle, busy = _slot(pool), _slot(pool)
    _slot(pool)  # never called: no worker
    await _probe(pool, idle)
    hanging = asyncio.ensure_future(pool.call(busy, {"action": "hang"}))
    assert await _until(lambda: len(pool.pids()) == 2)
    started = pool.pids()
    await pool.close()
    reply = await hanging
    assert not reply["ok"]
    assert not [pid for pid in started if _alive(pid)]
    assert await _until(lambda: not set(_with_in_cmdline(CHILD_SCRIPT)) - earlier, 30)


async def test_a_worker_dropped_while_it_starts_leaves_no_process() -> None:
    # A first call cancelled and its tool dropped at once (an agent deleted, say) while
    # bubblewrap is still setting the sandbox up: none of it may be left behind.
    earlier = set(_with_in_cmdline(CHILD_SCRIPT))
    pool = WorkerPool()
    for attempt in range(12):
        slot = _slot(pool)
        call = asyncio.ensure_future(pool.call(slot, {}))
        await asyncio.sleep(0.001 * attempt)  # cancelled at different points of the start
        call.cancel()
        pool.drop(slot)
    await pool.close()
    assert await _until(lambda: not set(_with_in_cmdline(CHILD_SCRIPT)) - earlier, 30)


async def test_binding_a_tool_starts_no_worker_until_its_first_call() -> None:
    pool = WorkerPool()
    try:
        tool = sandboxed_tool(SOURCE, {"name": "probe", "parameters": {
            "type": "object", "properties": {"action": {}, "marker": {}}}},
            limits=LIMITS, pool=pool)
        assert tool.function is not None
        await asyncio.sleep(1)  # a start would have a process by now
        assert pool.pids() == [] and not pool._starting
        await tool.function()
        assert len(pool.pids()) == 1
    finally:
        await pool.close()


async def test_stopping_a_tools_workers_ends_them_at_once_and_later_calls_keep_none() -> None:
    pool = WorkerPool()
    try:
        tool = sandboxed_tool(SOURCE, {"name": "probe", "parameters": {
            "type": "object", "properties": {"action": {}, "marker": {}}}},
            limits=LIMITS, pool=pool)
        assert tool.function is not None
        first = await tool.function()
        [pid] = pool.pids()
        stop_workers(tool)  # the tool object lives on (its agent was unloaded, say)
        assert await _until(lambda: not _alive(pid) and not pool.pids(), 5)
        assert await tool.function() != first  # a fresh worker: its own module token
        assert await _until(lambda: not pool.pids(), 5)  # and it stopped after its call
    finally:
        await pool.close()
