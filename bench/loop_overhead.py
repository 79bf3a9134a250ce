"""Loop overhead per step: stateloop against a bare hand-written loop, in the same run.

Both run a tool loop on a scripted model (N tool calls, then an answer). The bare loop is the
floor: a list of canned responses, a dict of functions, a list of dict messages. Also prints
``import stateloop`` time and resident memory.
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time

from stateloop import Agent, tool
from stateloop.testing import ScriptedModel, call, reply


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def add_sync(a: int, b: int) -> int:
    """Add two integers (a sync tool: runs in a worker thread)."""
    return a + b


def script(steps: int, name: str = "add") -> list:
    return [call(name, a=i, b=1) for i in range(steps - 1)] + [reply("done")]


async def stateloop_run(steps: int, tool_name: str) -> float:
    model = ScriptedModel(script(steps, tool_name))
    agent = Agent(model=model, tools=[add, add_sync], system="You add numbers.",
                  max_steps=steps + 1)
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    assert result.steps == steps and result.output == "done", result
    return elapsed


async def bare_run(steps: int, sync_tool: bool) -> float:
    """The hand-written floor: canned responses, direct dispatch, dict messages."""
    responses = [{"tool_calls": [{"id": f"c{i}", "name": "add",
                                  "arguments": json.dumps({"a": i, "b": 1})}]}
                 for i in range(steps - 1)] + [{"content": "done"}]
    functions = {"add": lambda a, b: a + b}
    loop = asyncio.get_running_loop()

    async def model(messages: list[dict]) -> dict:
        return responses[len(messages) // 2 - 1] if len(messages) > 1 else responses[0]

    started = time.perf_counter()
    messages: list[dict] = [{"role": "system", "content": "You add numbers."},
                            {"role": "user", "content": "go"}]
    index = 0
    while True:
        response = responses[index]
        index += 1
        messages.append({"role": "assistant", **response})
        if "tool_calls" not in response:
            break
        for tool_call in response["tool_calls"]:
            args = json.loads(tool_call["arguments"])
            fn = functions[tool_call["name"]]
            if sync_tool:
                value = await loop.run_in_executor(None, lambda fn=fn, args=args: fn(**args))
            else:
                value = fn(**args)
            messages.append({"role": "tool", "tool_call_id": tool_call["id"],
                             "content": str(value)})
    elapsed = time.perf_counter() - started
    assert messages[-1]["content"] == "done"
    return elapsed


async def measure(fn, steps: int, *args, repeat: int = 30) -> float:
    """Median microseconds per step."""
    await fn(steps, *args)  # warm up
    times = [await fn(steps, *args) for _ in range(repeat)]
    return statistics.median(times) / steps * 1e6


def import_cost() -> tuple[float, float]:
    code = ("import time, resource; t = time.perf_counter(); import stateloop; "
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    runs = [subprocess.run([sys.executable, "-X", "importtime", "-c", code] if False else
                           [sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(5)]
    seconds = statistics.median(float(r[0]) for r in runs)
    rss_mb = statistics.median(float(r[1]) for r in runs) / 1024
    return seconds, rss_mb


async def main() -> None:
    print("loop overhead, microseconds per step (median of 30 runs)")
    print(f"{'steps':>6} {'tool':>6} {'bare':>8} {'stateloop':>10} {'ratio':>7}")
    for tool_kind in ("async", "sync"):
        for steps in (10, 50, 200):
            bare = await measure(bare_run, steps, tool_kind == "sync")
            name = "add" if tool_kind == "async" else "add_sync"
            ours = await measure(stateloop_run, steps, name)
            print(f"{steps:>6} {tool_kind:>6} {bare:>8.1f} {ours:>10.1f} {ours / bare:>6.1f}x")
    seconds, rss_mb = import_cost()
    print(f"import stateloop: {seconds * 1000:.0f} ms, RSS after import {rss_mb:.0f} MB "
          f"(target < 300 ms)")
    print(f"this process RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    asyncio.run(main())
