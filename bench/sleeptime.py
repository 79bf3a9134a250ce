"""The main agent's reply latency with a sleep-time memory agent on, against it off.

Two stored agents on one SQLite file, the same scripted model (each call taking
``MODEL_LATENCY`` seconds, as a provider would), one with ``enable_sleeptime`` at frequency 1:
its memory agent runs after every turn (two model calls: an edit, then finishing). Each
round times two turns of the agent without a memory agent, then two of the one with:
the first starts with no memory run in flight (what the post-run hook costs), the second
right after it, while the memory run the first started is going (what sharing the event
loop and the database with it costs). Each is compared with the same position in two turns
of the agent without (what ran just before matters to CPU caches). Rounds are interleaved
and medians compared, so the machine's drift cancels out. Target: within 10% (ratio <= 1.10).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from stateloop import Agent, Block
from stateloop.llm.base import ModelRequest
from stateloop.testing import ScriptedModel, call, reply

ROUNDS = 31
MODEL_LATENCY = 0.05


def answer(request: ModelRequest):
    return reply("Noted.")


def memory_step(request: ModelRequest):
    # An edit first, then finish (the last message is the edit's result).
    if request.messages[-1].role == "tool":
        return call("memory_finish_edits")
    return call("memory_insert", label="human", new_string="A fact.")


async def timed(agent: Agent, text: str) -> float:
    started = time.perf_counter()
    result = await agent.run(text)
    elapsed = time.perf_counter() - started
    assert result.stop_reason == "end_turn", result
    return elapsed


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'bench.db'}"

        def model() -> ScriptedModel:
            return ScriptedModel(answer, latency=MODEL_LATENCY)

        blocks = [Block("human", "", limit=1_000_000)]
        off = await Agent.acreate(model(), store=db, name="off", blocks=blocks)
        on = await Agent.acreate(model(), store=db, name="on",
                                 blocks=[Block("human", "", limit=1_000_000)],
                                 enable_sleeptime=True, sleeptime_agent_frequency=1)
        assert on.sleeptime is not None
        on.sleeptime.model = ScriptedModel(memory_step, latency=MODEL_LATENCY)
        first, second, idle, overlapped = [], [], [], []
        for n in range(ROUNDS):
            await on.sleeptime.wait()
            first.append(await timed(off, f"message {n}"))
            second.append(await timed(off, f"again {n}"))
            idle.append(await timed(on, f"message {n}"))
            assert on.sleeptime.running  # the memory run started after the reply
            overlapped.append(await timed(on, f"again {n}"))
        await on.sleeptime.wait()
        assert on.sleeptime.last_error is None, on.sleeptime.last_error
        store = on.store
        assert store is not None
        runs = await store.list_runs(on.sleeptime.link.memory_agent_id, limit=10_000)
        value = (await store.get_agent_block(on.id, "human")).value

    print(f"sleeptime: {ROUNDS} rounds, model calls {MODEL_LATENCY * 1000:.0f} ms, "
          f"memory agent every turn ({len(runs)} memory runs, "
          f"{value.count('A fact.')} edits)")
    for label, times, base in (("first turn, none in flight", idle, first),
                               ("next turn, a memory run in flight", overlapped, second)):
        off_ms, on_ms = statistics.median(base) * 1000, statistics.median(times) * 1000
        print(f"  {label:<34} off {off_ms:6.1f} ms  on {on_ms:6.1f} ms  "
              f"ratio {on_ms / off_ms:.3f}")

if __name__ == "__main__":
    asyncio.run(main())
