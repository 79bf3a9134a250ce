"""Loop overhead per step: stateloop against a bare hand-written loop, in the same run.

Both run a tool loop on the same ScriptedModel (N - 1 tool calls, then an answer). The bare
loop is the floor: stream the response, call the function, append the messages — no
validation, events, hooks, timeouts or cancellation. "overhead" is what stateloop adds per
step, in microseconds. Also prints ``import stateloop`` time and resident memory.
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import subprocess
import sys
import time

from stateloop import Agent, tool
from stateloop.llm.base import ModelRequest, ModelResponse
from stateloop.messages import system, tool_result, user
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


async def bare_run(steps: int, tool_name: str) -> float:
    """The hand-written floor on the same scripted model: stream, dispatch, append."""
    model = ScriptedModel(script(steps, tool_name))
    functions = {"add": add.function, "add_sync": add_sync.function}
    specs = [add.spec(), add_sync.spec()]
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    messages = [system("You add numbers."), user("go")]
    while True:
        response = None
        async for item in model.stream(ModelRequest(list(messages), specs)):
            if isinstance(item, ModelResponse):
                response = item
        assert response is not None
        messages.append(response.message)
        if not response.message.tool_calls:
            break
        for tool_call in response.message.tool_calls:
            fn = functions[tool_call.name]
            if tool_call.name == "add":
                value = await fn(**tool_call.arguments)
            else:
                value = await loop.run_in_executor(None, lambda f=fn, a=tool_call.arguments: f(**a))
            messages.append(tool_result(tool_call, str(value)))
    elapsed = time.perf_counter() - started
    assert messages[-1].text == "done"
    return elapsed


async def measure(fn, steps: int, *args, repeat: int = 30) -> float:
    """Median microseconds per step."""
    await fn(steps, *args)  # warm up
    times = [await fn(steps, *args) for _ in range(repeat)]
    return statistics.median(times) / steps * 1e6


def import_cost() -> tuple[float, float]:
    code = ("import time; t = time.perf_counter(); import stateloop; "
            "rss = next(l for l in open('/proc/self/status') if l.startswith('VmRSS'));"
            "print(time.perf_counter() - t, int(rss.split()[1]))")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(5)]
    seconds = statistics.median(float(r[0]) for r in runs)
    rss_mb = statistics.median(float(r[1]) for r in runs) / 1024
    return seconds, rss_mb


async def main() -> None:
    print("loop overhead, microseconds per step (median of 30 runs)")
    print(f"{'steps':>6} {'tool':>6} {'bare':>8} {'stateloop':>10} {'ratio':>7} {'overhead':>9}")
    for tool_kind in ("async", "sync"):
        for steps in (10, 50, 200):
            name = "add" if tool_kind == "async" else "add_sync"
            bare = await measure(bare_run, steps, name)
            ours = await measure(stateloop_run, steps, name)
            print(f"{steps:>6} {tool_kind:>6} {bare:>8.1f} {ours:>10.1f} {ours / bare:>6.1f}x "
                  f"{ours - bare:>8.1f}")
    seconds, rss_mb = import_cost()
    print(f"import stateloop: {seconds * 1000:.0f} ms, RSS after import {rss_mb:.0f} MB "
          f"(target < 300 ms)")
    print(f"this process RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    asyncio.run(main())
