"""Per-step cost of a persisted agent against a bare loop committing once per step to SQLite.

Both run the same scripted tool loop. The bare loop streams the response, calls the tool and
commits the step's messages (JSON rows) in one SQLite transaction (WAL, synchronous=NORMAL).
stateloop writes its full checkpoint: messages with token counts and recall indexing, the
step record (on the step's last message row) and the in-context list (which a step that
only appends extends without rewriting). Each step commits before the next begins (a crash
loses at most the step in flight): these tools never yield to the event loop, so each step
is one transaction of its own, as in the bare loop, plus one for the run's start. The same
agent without a store shows what the loop itself costs, and runs of 20 steps what a run's
own writes (its row, its end, the system prompt recompiled by each reset) weigh. Then: the
same ratio for a new agent once it has about 100 and then 10,000 stored messages (the cost
of a step must not grow with history). Last, many agents stepping at once, each model call
taking a millisecond: there the steps of agents that finish in the same turn of the event
loop share a transaction; the ratio is against the same agents without a store.

The machine's speed drifts by up to 1.5x between runs; ratios are taken per round of the
bare loop and the agent run one after the other, so each compares like with like (and each
follows the other: what ran just before matters to CPU caches), and the median round is
reported.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from stateloop import Agent, tool
from stateloop.llm.base import ModelRequest, ModelResponse
from stateloop.messages import system, tool_result, user
from stateloop.testing import ScriptedModel, call, reply

STEPS = 50
SHORT_RUN = 20
ROUNDS = 21
AGENTS = 100  # stepping at once
AGENT_STEPS = 5
AGENT_ROUNDS = 9
MODEL_LATENCY = 0.001


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script(steps: int) -> list:
    return [call("add", a=i, b=1) for i in range(steps - 1)] + [reply("done")]


async def bare_run(db: sqlite3.Connection, steps: int) -> float:
    model = ScriptedModel(script(steps))
    specs = [add.spec()]
    started = time.perf_counter()
    messages = [system("You add numbers."), user("go")]
    while True:
        response = None
        async for item in model.stream(ModelRequest(list(messages), specs)):
            if isinstance(item, ModelResponse):
                response = item
        assert response is not None
        new = [response.message]
        for tool_call in response.message.tool_calls:
            value = await add.function(**tool_call.arguments)  # type: ignore[misc]
            new.append(tool_result(tool_call, str(value)))
        messages += new
        with db:
            db.executemany("INSERT INTO messages (id, data) VALUES (?, ?)",
                           [(m.id, json.dumps(m.to_dict())) for m in new])
        if not response.message.tool_calls:
            break
    return time.perf_counter() - started


async def stateloop_run(agent: Agent, steps: int) -> float:
    agent.model = ScriptedModel(script(steps))
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    assert result.steps == steps and result.output == "done", result
    return elapsed


async def against_bare(raw: sqlite3.Connection, agent: Agent,
                       steps: int = STEPS) -> tuple[float, float, float]:
    """(ratio, bare us/step, agent us/step) of the median round: each round runs the bare
    loop, then the agent, so each follows the other and sees the same machine."""
    rounds = []
    for _ in range(ROUNDS):
        bare = await bare_run(raw, steps) / steps * 1e6
        ours = await stateloop_run(agent, steps) / steps * 1e6
        agent.reset()
        rounds.append((ours / bare, bare, ours))
    return sorted(rounds)[len(rounds) // 2]


def new_agent(folder: Path | None, name: str, db: str | None = None) -> Agent:
    """An agent on a SQLite file in ``folder`` (``db``, by default its own), or (None)
    without a store."""
    store = {} if folder is None else {"store": f"sqlite:///{folder / (db or name)}.db",
                                       "name": name}
    return Agent(model=ScriptedModel([]), tools=[add], system="You add numbers.",
                 max_steps=STEPS + 1, **store)


async def many_at_once(agents: list[Agent]) -> float:
    """Seconds per step of ``agents`` each running ``AGENT_STEPS`` steps, all at once."""
    for agent in agents:
        agent.model = ScriptedModel(script(AGENT_STEPS), latency=MODEL_LATENCY)
    started = time.perf_counter()
    results = await asyncio.gather(*(agent.run("go") for agent in agents))
    elapsed = time.perf_counter() - started
    assert all(r.steps == AGENT_STEPS and r.output == "done" for r in results), results
    for agent in agents:
        agent.reset()
    return elapsed / (len(agents) * AGENT_STEPS)


async def agents_at_once(folder: Path) -> tuple[float, float, float]:
    """(ratio, stored us/step, unstored us/step) of the median round, ``AGENTS`` at once on
    one database (as in a server)."""
    stored = [new_agent(folder, f"many-{i}", "many") for i in range(AGENTS)]
    unstored = [new_agent(None, f"many-{i}") for i in range(AGENTS)]
    rounds = []
    for _ in range(AGENT_ROUNDS):
        bare = await many_at_once(unstored) * 1e6
        ours = await many_at_once(stored) * 1e6
        rounds.append((ours / bare, ours, bare))
    return sorted(rounds)[len(rounds) // 2]


async def main() -> None:
    folder = Path(tempfile.mkdtemp())
    raw = sqlite3.connect(folder / "bare.db", isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=NORMAL")
    raw.execute("CREATE TABLE messages (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, data TEXT)")
    raw.isolation_level = ""  # transactions via `with db:`

    agent = new_agent(folder, "bench")
    ratio, bare_us, ours_us = await against_bare(raw, agent)
    loop_ratio, _, loop_us = await against_bare(raw, new_agent(None, "in_memory"))
    short_ratio, _, short_us = await against_bare(raw, agent, SHORT_RUN)
    print(f"persisted step, microseconds (the median of {ROUNDS} rounds of {STEPS} steps)")
    print(f"  bare loop + 1 SQLite commit/step: {bare_us:8.1f}")
    print(f"  stateloop with SQLite store:      {ours_us:8.1f}   {ratio:.2f}x")
    print(f"  stateloop without a store:        {loop_us:8.1f}   {loop_ratio:.2f}x")
    print(f"  with the store, runs of {SHORT_RUN} steps: {short_us:8.1f}   {short_ratio:.2f}x "
          "(each run's own writes weigh more)")

    # Flat with history: a new agent's run once it has 100 and 10,000 stored messages.
    agent = new_agent(folder, "history")
    store = agent.store
    assert store is not None
    print("per-step cost against stored history")
    for target in (100, 10_000):
        while await store.count_messages(agent.id) < target:
            await stateloop_run(agent, STEPS)
            agent.reset()
        stored = await store.count_messages(agent.id)
        ratio, _, ours_us = await against_bare(raw, agent)
        print(f"  {stored:>6} stored messages: {ours_us:8.1f} us/step   {ratio:.2f}x the bare loop")

    ratio, ours_us, bare_us = await agents_at_once(folder)
    print(f"{AGENTS} agents stepping at once ({MODEL_LATENCY * 1000:.0f} ms model calls), "
          f"wall-clock microseconds per step (the median of {AGENT_ROUNDS} rounds)")
    print(f"  without a store: {bare_us:8.1f}")
    print(f"  with the store:  {ours_us:8.1f}   {ratio:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
