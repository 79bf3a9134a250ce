"""What memory history adds to a step that edits memory: a persisted agent on SQLite whose
every step calls ``memory_replace`` (so every step is a commit in its memory repository),
with history written and with the commit left out, from the agent's first commits and again
past 10,000; and how long ``git clone`` of that agent takes from a served stateloop once it
has 1,000 commits (the real git program, over loopback).

Rounds alternate the two (each follows the other, so both see the same machine); the median
round's difference per step is reported, with its ratio. On a loaded machine that difference
is noisy, so the time spent writing the commits inside the step's transaction is measured
directly too (the median over the rounds' steps).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from stateloop import Agent, Block
from stateloop.server import bind, create_app
from stateloop.server.settings import ServerSettings
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
    before = await commits(agent)
    extra, bare, ratio, commit = await measure(agent, counter)
    print(f"{before} to {await commits(agent)} commits: +{extra:.3f} ms per memory-editing "
          f"step ({bare:.3f} ms without history, ratio {ratio:.2f}); writing the commit "
          f"{commit:.3f} ms (median)")


def clone_seconds(db: Path, agent_id: str, folder: Path) -> float:
    """The median of three ``git clone``s of the agent from a server on this database."""
    sock = bind("127.0.0.1", 0)
    app = create_app(ServerSettings(database_url=f"sqlite:///{db}"))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/git/{agent_id}/state.git"
    times = []
    try:
        for i in range(3):
            started = time.perf_counter()
            subprocess.run(["git", "clone", "-q", url, str(folder / f"clone{i}")], check=True,
                           env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
            times.append(time.perf_counter() - started)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    return statistics.median(times)


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        agent = Agent(model=ScriptedModel([]), tools=["memory_replace"], system="You edit.",
                      blocks=[Block(label="human", value="n=0\n"),
                              Block(label="persona", value="A careful note taker.")],
                      max_steps=FILL_RUN + 1, store=f"sqlite:///{Path(folder) / 'h.db'}",
                      name="historian")
        counter = Counter()
        await report(agent, counter)
        while await commits(agent) < 1_000:
            await run(agent, counter, 100)
        seconds = await asyncio.to_thread(clone_seconds, Path(folder) / "h.db", agent.id,
                                          Path(folder))
        print(f"git clone of {await commits(agent)} commits: {seconds:.2f} s (median of 3)")
        while await commits(agent) < 10_000:
            await run(agent, counter, FILL_RUN)
        await report(agent, counter)
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
