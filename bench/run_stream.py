"""What following a run's stream from another process costs, on PostgreSQL, in one run.

1. The writing side: agents streaming runs token by token through the server's run registry
   on a PostgreSQL store, with their frames written to ``run_frames`` (every 50 ms and at
   each step's end) against the same registry keeping them in memory only. Rounds alternate;
   the median ratio of wall times is reported.
2. The reading side: frames published every few milliseconds, followed by a reader on a
   second store of the same database (as another process would) against a reader of the
   in-memory channel; the delay from publish to arrival, p50 and p99.

    python bench/run_stream.py
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from stateloop import Agent
from stateloop.messages import user
from stateloop.server.services.run_frames import FrameLog, follow_stored
from stateloop.server.services.runs import RunChannel, RunRegistry
from stateloop.store import AgentRecord, open_store
from stateloop.testing import ScriptedModel, reply

AGENTS = 20
RUNS = 3  # per agent and round
ROUNDS = 7
TEXT = " ".join(f"word{i}" for i in range(60))  # ~50 token frames per run
MODEL_LATENCY = 0.005
FRAMES = 400
FRAME_EVERY = 0.005


class MemoryOnly(RunRegistry):
    """The registry as on SQLite: frames in memory only."""

    def _frame_log(self, agent: Agent) -> FrameLog | None:
        return None


async def workload(registry: RunRegistry, agents: list[Agent]) -> float:
    """Seconds for every agent to stream ``RUNS`` runs, all agents at once."""

    async def one(agent: Agent) -> None:
        for _ in range(RUNS):
            agent.model = ScriptedModel([reply(TEXT)], latency=MODEL_LATENCY)
            channel = await registry.start(agent, [user("go")], [], stream_tokens=True)
            async for _frame in channel.follow(0):
                pass

    started = time.perf_counter()
    await asyncio.gather(*(one(agent) for agent in agents))
    return time.perf_counter() - started


async def writing(url: str) -> None:
    agents = [Agent(model=ScriptedModel([]), system="Talk.", store=url, name=f"a{i}")
              for i in range(AGENTS)]
    logged = RunRegistry(events_per_run=20_000, finished_runs=500)
    memory = MemoryOnly(events_per_run=20_000, finished_runs=500)
    await workload(logged, agents)  # warm up
    await workload(memory, agents)
    ratios: list[float] = []
    times: dict[str, list[float]] = {"memory": [], "table": []}
    for _ in range(ROUNDS):
        base = await workload(memory, agents)
        with_table = await workload(logged, agents)
        times["memory"].append(base)
        times["table"].append(with_table)
        ratios.append(with_table / base)
    await logged.close()
    await memory.close()
    runs = AGENTS * RUNS
    print(f"{AGENTS} agents streaming {RUNS} runs each at once (~50 frames a run), "
          f"median of {ROUNDS} rounds:")
    for name, values in times.items():
        print(f"  frames {'in memory only' if name == 'memory' else 'also in run_frames':<20}"
              f" {statistics.median(values) / runs * 1000:7.2f} ms/run")
    print(f"  ratio (run_frames / memory only): {statistics.median(ratios):.2f}x")


async def reading(url: str) -> None:
    writer, reader = await open_store(url), await open_store(url)  # two processes' stores
    agent = await writer.create_agent(AgentRecord(name="latency", system=""))
    log = FrameLog(writer, keep=20_000)
    delays: dict[str, list[float]] = {"memory": [], "table": []}
    for _ in range(3):
        run = await writer.create_run(agent.id, status="running")
        channel = RunChannel(agent.id, capacity=20_000)

        async def follow(name: str, frames: AsyncIterator[dict[str, Any] | None]) -> None:
            async for frame in frames:
                if frame is not None and "sent" in frame:
                    delays[name].append(time.perf_counter() - frame["sent"])

        followers = [asyncio.create_task(follow("memory", channel.follow(0))),
                     asyncio.create_task(follow("table", follow_stored(reader, run.id, 0)))]
        for _ in range(FRAMES):
            frames = [{"message_type": "assistant_message", "sent": time.perf_counter()}]
            await channel.publish(frames)
            log.add(run.id, frames)
            await asyncio.sleep(FRAME_EVERY)
        await channel.close()
        log.end(run.id, channel.last_seq)
        await asyncio.gather(*followers)
    await log.close()
    await writer.close()
    await reader.close()
    print(f"a frame every {FRAME_EVERY * 1000:.0f} ms, delay from publish to a reader "
          f"({3 * FRAMES} frames):")
    for name, values in delays.items():
        cut = statistics.quantiles(values, n=100)
        label = "in memory (same process)" if name == "memory" else "run_frames (other store)"
        print(f"  {label:<28} p50 {cut[49] * 1000:6.1f} ms   p99 {cut[98] * 1000:6.1f} ms")


async def main(url: str) -> None:
    await writing(url)
    await reading(url)


if __name__ == "__main__":
    import pgserver

    pg_dir = Path(tempfile.mkdtemp(prefix="stateloop-pg-"))
    server = pgserver.get_server(pg_dir, cleanup_mode="delete")
    try:
        server.psql("CREATE DATABASE bench")
        asyncio.run(main(server.get_uri("bench")))
    finally:
        server.cleanup()
