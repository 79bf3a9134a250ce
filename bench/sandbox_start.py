"""What isolating a source tool's call costs: the median wall time of one call of a trivial
tool in a bubblewrap sandbox against the same call as a plain subprocess (the unisolated
mode, and what every call cost before the sandbox), in the same run. Both start a fresh
interpreter that imports stateloop and pydantic; the difference is bubblewrap's setup
(namespaces, mounts) and its teardown."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from stateloop.tools.bwrap import bwrap_problem
from stateloop.tools.sandbox import Isolation, SandboxLimits, run_source

SOURCE = "def double(n: int) -> int:\n    \"\"\"Twice n.\"\"\"\n    return 2 * n\n"
CALLS = 50


async def median_call(isolation: Isolation) -> float:
    timings = []
    for index in range(CALLS):
        started = time.perf_counter()
        assert await run_source(SOURCE, "double", {"n": index}, SandboxLimits(),
                                isolation) == str(2 * index)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


async def main() -> None:
    problem = bwrap_problem()
    if problem:
        sys.exit(f"bubblewrap is unusable here: {problem}")
    await median_call(Isolation())  # warm the page cache for both
    plain = await median_call(Isolation(bwrap=None))
    sandboxed = await median_call(Isolation())
    print(f"source tool call, median of {CALLS}: plain subprocess {plain * 1000:.1f} ms, "
          f"bubblewrap sandbox {sandboxed * 1000:.1f} ms, "
          f"ratio {sandboxed / plain:.2f}x (+{(sandboxed - plain) * 1000:.1f} ms)")


if __name__ == "__main__":
    asyncio.run(main())
