"""In-process cost of one model call through an adapter, against a bare httpx call.

An ``Agent`` with ``OpenAIModel`` (and ``AnthropicModel``) answers plain messages from the
fake provider with 0, 1,000 and 10,000 messages already in context (a window large enough
that nothing is compacted). The floor is a bare httpx client posting the same request body,
already serialized, and reading the SSE stream to its end: it includes the fake's own time.
"overhead" is the agent's round trip minus the floor (medians of interleaved rounds), the
ratio is agent / floor. The fake serves from a thread of this process, so "cpu" — the CPU
time of the calling thread alone — is the clearest figure of what the client side costs.
``--profile`` prints a cProfile of the agent's calls at 10,000.

Last, ``run_sync`` (an event loop per call) against ``await run()`` in one loop, plus the
cost of starting an empty event loop: the first should cost about the sum of the others.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import socket
import statistics
import time

import httpx

from stateloop import Agent
from stateloop.llm.anthropic import AnthropicModel
from stateloop.llm.base import Model
from stateloop.llm.openai import OpenAIModel
from stateloop.messages import Message, ToolCall, assistant, tool_result, user
from stateloop.testing import fake_openai, reply
from stateloop.testing.fake_openai import FakeOpenAI

SIZES = (0, 1_000, 10_000)
_setup = fake_openai._Handler.setup


def _no_delay(handler: fake_openai._Handler) -> None:
    # The fake writes a stream in small pieces; without TCP_NODELAY (which real servers set)
    # each one waits for the client's delayed ACK on a kept-alive connection, ~40 ms a call.
    _setup(handler)
    handler.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


fake_openai._Handler.setup = _no_delay  # type: ignore[method-assign, assignment]
WINDOW = 100_000_000


def history(count: int) -> list[Message]:
    """A conversation of ``count`` messages: questions, answers, and tool calls with results."""
    messages: list[Message] = []
    i = 0
    while len(messages) < count:
        messages.append(user(f"Question {i}: what is the weather like in city number {i} "
                             f"today, and should I take an umbrella?"))
        if i % 3 == 0:
            found = ToolCall(f"call_{i:06d}", "get_weather", {"city": f"city {i}"})
            messages.append(assistant("Let me check.", [found]))
            messages.append(tool_result(found, f"Sunny, {i % 30} degrees, light wind."))
        messages.append(assistant(f"In city {i} it is sunny; no umbrella needed today."))
        i += 1
    return messages[:count]


def make_agent(model: Model, count: int) -> Agent:
    agent = Agent(model, system="You are a helpful assistant.", include_base_tools=False,
                  context_window=WINDOW)
    agent.state.transcript += history(count)  # seeded in memory: nothing to persist or compact
    return agent


async def bare(client: httpx.AsyncClient, url: str, body: bytes,
               headers: dict[str, str]) -> None:
    async with client.stream("POST", url, content=body, headers=headers) as response:
        response.raise_for_status()
        async for _line in response.aiter_lines():
            pass


async def measure(name: str, model: Model, url: str, fake: FakeOpenAI, count: int,
                  rounds: int, profile: cProfile.Profile | None) -> None:
    agent = make_agent(model, count)
    await agent.run("warm up")  # counts the seeded messages once, opens the connection
    headers = {"content-type": "application/json", "x-api-key": "bench",
               "anthropic-version": "2023-06-01"}
    body = json.dumps(fake.requests[-1].body).encode()
    agent_times, bare_times, agent_cpu, bare_cpu = [], [], [], []
    async with httpx.AsyncClient(timeout=60) as client:
        await bare(client, url, body, headers)
        for _ in range(rounds):
            started, cpu = time.perf_counter(), time.thread_time()
            await bare(client, url, body, headers)
            bare_times.append(time.perf_counter() - started)
            bare_cpu.append(time.thread_time() - cpu)
            if profile is not None:
                profile.enable()
            started, cpu = time.perf_counter(), time.thread_time()
            await agent.run("How are you?")
            agent_times.append(time.perf_counter() - started)
            agent_cpu.append(time.thread_time() - cpu)
            if profile is not None:
                profile.disable()
            del fake.requests[:]  # the fake keeps every body; not part of the measurement
    ours, floor = statistics.median(agent_times), statistics.median(bare_times)
    print(f"{name:<9} {count:>6,} msgs  agent {ours * 1e3:8.2f} ms  bare httpx "
          f"{floor * 1e3:8.2f} ms  overhead {(ours - floor) * 1e3:7.2f} ms  "
          f"ratio x{ours / floor:.2f}  cpu {statistics.median(agent_cpu) * 1e3:6.2f} ms "
          f"(bare {statistics.median(bare_cpu) * 1e3:5.2f})")


async def main(rounds: int, with_profile: bool) -> None:
    with FakeOpenAI(lambda request: reply("Fine, thanks.")) as fake:
        for count in SIZES:
            profile = cProfile.Profile() if with_profile and count == SIZES[-1] else None
            await measure("openai", OpenAIModel("gpt-4o-mini", base_url=fake.base_url,
                                                api_key="bench", context_window=WINDOW),
                          f"{fake.base_url}/chat/completions", fake, count, rounds, profile)
            if profile is not None:
                pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
            await measure("anthropic", AnthropicModel("claude-haiku-4-5", base_url=fake.url,
                                                      api_key="bench", context_window=WINDOW),
                          f"{fake.url}/v1/messages", fake, count, rounds, None)


def run_sync_against_run(rounds: int) -> None:
    with FakeOpenAI(lambda request: reply("Fine, thanks.")) as fake:
        agent = make_agent(OpenAIModel("gpt-4o-mini", base_url=fake.base_url, api_key="bench",
                                       context_window=WINDOW), 0)

        async def one_run() -> float:
            del agent.state.transcript[1:], fake.requests[:]
            started = time.perf_counter()
            await agent.run("How are you?")
            return time.perf_counter() - started

        def one_sync() -> float:
            del agent.state.transcript[1:], fake.requests[:]
            started = time.perf_counter()
            agent.run_sync("How are you?")
            return time.perf_counter() - started

        def one_loop() -> float:
            started = time.perf_counter()
            asyncio.run(asyncio.sleep(0))
            return time.perf_counter() - started

        async def runs() -> list[float]:
            return [await one_run() for _ in range(10)]

        one_sync()
        synced, awaited, loops = [], [], []
        for _ in range(rounds):
            synced += [one_sync() for _ in range(10)]
            awaited += asyncio.run(runs())[1:]
            loops += [one_loop() for _ in range(10)]
    sync, run, loop = (statistics.median(t) * 1e3 for t in (synced, awaited, loops))
    print(f"run_sync {sync:.2f} ms   await run() {run:.2f} ms + loop start {loop:.2f} ms "
          f"= {run + loop:.2f} ms   ratio x{sync / (run + loop):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--profile", action="store_true")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.profile))
    run_sync_against_run(arguments.rounds)
