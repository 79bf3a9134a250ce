"""What memory history adds to a step that edits memory: a persisted agent on SQLite whose
every step calls ``memory_replace`` (so every step is a commit in its memory repository),
with history written and with the commit left out, at about 100 and 10,000 commits.

Rounds alternate the two (each follows the other, so both see the same machine); the median
round's difference per step is reported, with its ratio. On a loaded machine that difference
is noisy, so the time spent writing the commits inside the step's transaction is measured
directly too (the median over the rounds' steps).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stateloop import Agent, Block
from stateloop.store import checkpoints
from stateloop.testing import ScriptedModel, call, reply

STEPS = 50
ROUNDS = 21
FILL_RUN = 500  # steps per run while filling the history


def script(start: int, steps: int) -> list[Any]:
    calls = [call("memory_replace", label="human", old_string=f"n={i}\n",
                  new_string=f"n={i + 1}\n") for i in range(start, start + steps - 1)]
    return [*calls, reply("done")]


class Counter:
    def __init__(self) -> None:
        self.n = 0


async def run(agent: Agent, counter: Counter, steps: int) -> float:
    agent.model = ScriptedModel(script(counter.n, steps))
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    assert result.steps == steps and result.output == "done", result
    counter.n += steps - 1
    agent.reset()
    return elapsed / steps * 1000


def without_history(_conn: Any, **_kwargs: Any) -> dict[str, str]:
    return {}


SPENT: list[float] = []


def timed(conn: Any, **kwargs: Any) -> dict[str, str]:
    started = time.perf_counter()
    try:
        return WITH_HISTORY(conn, **kwargs)
    finally:
        SPENT.append((time.perf_counter() - started) * 1000)


WITH_HISTORY = checkpoints.commit_agents


async def measure(agent: Agent, counter: Counter) -> tuple[float, float, float, float]:
    """(extra ms per step, ms per step without history, ratio) of the median round, and the
    median ms a step spent writing its commit."""
    rounds = []
    SPENT.clear()
    for _ in range(ROUNDS):
        checkpoints.commit_agents = without_history  # type: ignore[assignment]
        bare = await run(agent, counter, STEPS)
        checkpoints.commit_agents = timed  # type: ignore[assignment]
        ours = await run(agent, counter, STEPS)
        checkpoints.commit_agents = WITH_HISTORY
        rounds.append((ours - bare, bare, ours / bare))
    return (*sorted(rounds)[len(rounds) // 2], sorted(SPENT)[len(SPENT) // 2])


async def commits(agent: Agent) -> int:
    history = await agent.amemory_history(limit=1)
    return history[0].seq if history else 0


async def report(agent: Agent, counter: Counter) -> None:
    extra, bare, ratio, commit = await measure(agent, counter)
    print(f"~{await commits(agent)} commits: +{extra:.3f} ms per memory-editing step "
          f"({bare:.3f} ms without history, ratio {ratio:.2f}); writing the commit "
          f"{commit:.3f} ms (median)")


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        agent = Agent(model=ScriptedModel([]), tools=["memory_replace"], system="You edit.",
                      blocks=[Block(label="human", value="n=0\n"),
                              Block(label="persona", value="A careful note taker.")],
                      max_steps=FILL_RUN + 1, store=f"sqlite:///{Path(folder) / 'h.db'}",
                      name="historian")
        counter = Counter()
        await report(agent, counter)
        while await commits(agent) < 10_000:
            await run(agent, counter, FILL_RUN)
        await report(agent, counter)
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
