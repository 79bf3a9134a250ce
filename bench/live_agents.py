"""Memory of the server's live agents: bytes a live agent holds with 0, 100 and 1,000
messages in context (tracemalloc over copies loaded as the server loads them), and the RSS
growth of messaging 400 agents once each under a bound (run each bound in a process of its
own: the allocator keeps what an earlier part freed).

    python bench/live_agents.py [--copies 20]             # per agent, then 400 at 1000 live
    python bench/live_agents.py --many --bound 50 --text-kb 50  # 400 agents, 50 live
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import tracemalloc
from pathlib import Path

from stateloop import Agent
from stateloop.server.services.runtime import Runtime
from stateloop.server.settings import ServerSettings
from stateloop.store import open_store
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import ScriptedModel, reply

MODEL = "openai/gpt-4o-mini"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def agent_with(store: object, messages: int, name: str) -> str:
    """An agent whose context holds ``messages`` messages (user/assistant pairs)."""
    turns = messages // 2
    model = ScriptedModel([reply(f"answer number {n} " + "x" * 40) for n in range(turns)],
                          name=MODEL)
    agent = await Agent.acreate(model, store=store, name=name)  # type: ignore[arg-type]
    for n in range(turns):
        await agent.run(f"question number {n} " + "y" * 40)
    return agent.id


async def per_agent(copies: int, workdir: Path) -> None:
    settings = ServerSettings(database_url=f"sqlite:///{workdir / 'per.db'}",
                              model_api_key="unused", live_agents=copies + 1)
    store = await open_store(settings.database_url)
    runtime = Runtime(settings, store)
    try:
        for messages in (0, 100, 1000):
            agent_id = await agent_with(store, messages, f"m{messages}")
            kept = [await runtime.agent(agent_id)]  # the first load warms caches
            runtime.forget(agent_id)
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(copies):
                kept.append(await runtime.agent(agent_id))
                runtime.forget(agent_id)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
            snapshot = tracemalloc.take_snapshot()
            tracemalloc.stop()
            print(f"{messages:>5} messages in context: {held / copies / 1024:8.1f} KiB "
                  "a live agent")
            for stat in snapshot.statistics("filename")[:4]:
                print(f"        {stat.size / copies / 1024:8.1f} KiB  {stat.traceback}")
            del kept
    finally:
        await store.close()


async def many(count: int, live_agents: int, text_kb: int, workdir: Path) -> None:
    """Message ``count`` agents once each (``text_kb`` KiB of text), one task per agent as
    requests are, through the fake provider; print the RSS growth."""
    url = f"sqlite:///{workdir / 'many.db'}"
    with FakeOpenAI(lambda request: reply("hello to you")) as fake:
        settings = ServerSettings(database_url=url, model_api_key="unused",
                                  model_base_url=fake.base_url, live_agents=live_agents)
        store = await open_store(url)
        runtime = Runtime(settings, store)
        ids = [(await Agent.acreate(MODEL, store=store, name=f"a{n}")).id
               for n in range(count)]

        async def request(agent_id: str) -> None:
            await (await runtime.agent(agent_id)).run(f"hello {agent_id} " + "z" * text)

        text = text_kb * 1024

        await request(ids[0])  # what the first run loads (the provider SDK, say)
        gc.collect()
        start = rss_mb()
        tracemalloc.start()
        for agent_id in ids[1:]:
            await asyncio.create_task(request(agent_id))
            fake.requests.clear()  # the fake provider keeps what it was sent
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] / 2**20
        tracemalloc.stop()
        print(f"{count} agents messaged {text_kb} KiB, STATELOOP_LIVE_AGENTS={live_agents}: "
              f"{runtime.live_count} live, Python heap +{held:.1f} MB, RSS {start:.0f} -> "
              f"{rss_mb():.0f} MB (+{rss_mb() - start:.1f} MB)")
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--agents", type=int, default=400)
    parser.add_argument("--bound", type=int, default=1000)
    parser.add_argument("--text-kb", type=int, default=1, help="what each agent is sent")
    parser.add_argument("--many", action="store_true", help="only the RSS of --agents agents")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        if not args.many:
            asyncio.run(per_agent(args.copies, Path(workdir)))
        asyncio.run(many(args.agents, args.bound, args.text_kb, Path(workdir)))


if __name__ == "__main__":
    main()
