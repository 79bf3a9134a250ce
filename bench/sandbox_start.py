"""What running a source tool in its sandbox costs, against baselines in the same run.

Calls (medians; rounds interleaved):
- baselines: the tool called in process, and a bare ``python -I -c pass`` subprocess;
- cold: a call in a sandbox of its own, started and stopped with it (``run_source``), in
  bubblewrap and unisolated (bubblewrap's share is the difference);
- warm: a call on a pool's worker, as the server makes them: a child forked ahead from a
  zygote that has the tool loaded; calls come back to back here, so each also waits for
  the clean-up after the one before and the next fork (a server has a model call between).
Through the server: a 20-step run of an agent calling a source tool, per step (from one
streamed tool result to the next), against the same run of an agent whose tool is the same
function given to the server as a Python tool (in process); the source tool's overhead per
step is the median over rounds of the two runs' difference. That part uses only the
server's API, so it also measures an older checkout (``PYTHONPATH=... --server``).

    PYTHONPATH=src .venv/bin/python bench/sandbox_start.py [--calls 200] [--server]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

SOURCE = "def double(n: int) -> int:\n    \"\"\"Twice n.\"\"\"\n    return 2 * n\n"
STEPS = 20


def double(n: int) -> int:
    return 2 * n


async def median_ms(action: Callable[[int], Awaitable[Any]], calls: int) -> float:
    timings = []
    for index in range(calls):
        started = time.perf_counter()
        await action(index)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


async def calls_section(calls: int) -> None:
    from stateloop.tools.bwrap import bwrap_problem
    from stateloop.tools.pool import WorkerPool
    from stateloop.tools.sandbox import Isolation, SandboxLimits, run_source
    from stateloop.tools.worker import WorkerSpec

    problem = bwrap_problem()
    if problem:
        sys.exit(f"bubblewrap is unusable here: {problem}")

    async def in_process(n: int) -> None:
        assert double(n) == 2 * n

    async def bare_python(n: int) -> None:
        process = await asyncio.create_subprocess_exec(sys.executable, "-I", "-c", "pass")
        assert await process.wait() == 0

    def cold(isolation: Isolation) -> Callable[[int], Awaitable[None]]:
        async def call(n: int) -> None:
            assert await run_source(SOURCE, "double", {"n": n}, SandboxLimits(),
                                    isolation) == str(2 * n)
        return call

    pool = WorkerPool()
    slots = {name: pool.slot(WorkerSpec(SOURCE, "double", SandboxLimits(), isolation))
             for name, isolation in (("bwrap", Isolation()), ("plain", Isolation(bwrap=None)))}

    def warm(name: str) -> Callable[[int], Awaitable[None]]:
        async def call(n: int) -> None:
            reply = await pool.call(slots[name], {"n": n})
            assert reply["ok"] and reply["result"] == str(2 * n), reply
        return call

    actions = {"in process": in_process, "bare python -I subprocess": bare_python,
               "cold, bubblewrap (run_source)": cold(Isolation()),
               "cold, unisolated (run_source)": cold(Isolation(bwrap=None)),
               "warm, bubblewrap (pool)": warm("bwrap"), "warm, unisolated (pool)": warm("plain")}
    rounds = 5
    results: dict[str, list[float]] = {name: [] for name in actions}
    try:
        for action in actions.values():  # warm the page cache and the workers
            await median_ms(action, 3)
        for _ in range(rounds):
            for name, action in actions.items():
                starts = name.startswith(("cold", "bare"))  # a process each: fewer of them
                count = max(3, calls // rounds // (10 if starts else 1))
                results[name].append(await median_ms(action, count))
    finally:
        await pool.close()
    figures = {name: statistics.median(values) for name, values in results.items()}
    base = figures["in process"]
    print(f"source tool call, p50 of {rounds} interleaved rounds (overhead over in process):")
    for name, value in figures.items():
        print(f"  {name:<32} {value:8.2f} ms   (+{value - base:.2f} ms)")
    warm, bare = figures["warm, bubblewrap (pool)"], figures["bare python -I subprocess"]
    bwrap = figures["cold, bubblewrap (run_source)"] - figures["cold, unisolated (run_source)"]
    print(f"  warm call / bare subprocess: {warm / bare:.2f}x; "
          f"bubblewrap's share of a cold call: {bwrap:+.1f} ms")


SERVER = """
import sys, uvicorn
from stateloop.server import create_app
from stateloop.tools import Tool

def double_py(n: int) -> int:
    \"\"\"Twice n.\"\"\"
    return 2 * n

uvicorn.run(create_app(tools=[Tool.from_function(double_py)]), host="127.0.0.1",
            port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


def _script(request: Any) -> Any:
    """Call the agent's tool (whichever of the two it has) until it has STEPS results."""
    from stateloop.testing.scripted import call, reply

    results = 0
    for message in reversed(request.messages):
        if message.role == "user":
            break
        results += message.role == "tool"
    tool = next(spec.name for spec in request.tools if spec.name.startswith("double"))
    return call(tool, n=results) if results < STEPS else reply("done")


async def server_section(rounds: int) -> None:
    import httpx

    from stateloop.testing.fake_openai import FakeOpenAI

    fake = FakeOpenAI(_script).start()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    db_url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    env = {**os.environ, "STATELOOP_DATABASE_URL": db_url,
           "STATELOOP_MODEL_BASE_URL": fake.base_url, "STATELOOP_MODEL_API_KEY": "test"}
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            deadline = time.time() + 30
            while True:
                try:
                    if (await http.get("/v1/health/")).status_code == 200:
                        break
                except httpx.HTTPError:
                    if time.time() > deadline:
                        raise
                await asyncio.sleep(0.1)
            (await http.post("/v1/tools/", json={"source_code": SOURCE})).raise_for_status()
            agents = {}
            for tool in ("double", "double_py"):
                created = await http.post("/v1/agents/", json={
                    "name": f"bench-{tool}", "model": "openai/gpt-4o-mini", "tools": [tool]})
                created.raise_for_status()
                agents[tool] = created.json()["id"]

            async def run(agent_id: str) -> list[float]:
                """The run's steps, each from one tool result to the next (streamed)."""
                marks = [time.perf_counter()]
                async with http.stream("POST", f"/v1/agents/{agent_id}/messages/stream", json={
                        "messages": [{"role": "user", "content": "go"}]}) as response:
                    response.raise_for_status()
                    async for line in response.aiter_lines():
                        if '"tool_return_message"' in line:
                            assert '"success"' in line, line
                            marks.append(time.perf_counter())
                assert len(marks) == STEPS + 1, len(marks)
                return [(b - a) * 1000 for a, b in itertools.pairwise(marks)]

            first = {tool: statistics.median(await run(agent_id))
                     for tool, agent_id in agents.items()}
            per_step: dict[str, list[float]] = {tool: [] for tool in agents}
            paired = []  # per round: the source tool's median step minus the Python tool's
            for _ in range(rounds):
                medians = {}
                for tool, agent_id in agents.items():
                    steps = await run(agent_id)
                    per_step[tool] += steps
                    medians[tool] = statistics.median(steps)
                paired.append(medians["double"] - medians["double_py"])
    finally:
        server.terminate()
        server.wait(timeout=30)
        fake.stop()
    source, python = (statistics.median(per_step[t]) for t in ("double", "double_py"))
    print(f"server, {STEPS}-step run, per step (p50 of the steps of {rounds} interleaved runs): "
          f"source tool {source:.1f} ms, Python tool {python:.1f} ms; source tool overhead "
          f"per step, p50 of the rounds' paired differences: {statistics.median(paired):+.1f} ms "
          f"(first run, cold start included: {first['double']:.1f} vs "
          f"{first['double_py']:.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--server", action="store_true", help="the server part only")
    args = parser.parse_args()
    if not args.server:
        asyncio.run(calls_section(args.calls))
    asyncio.run(server_section(args.rounds))


if __name__ == "__main__":
    main()
