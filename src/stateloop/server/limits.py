"""Limits, each off unless configured, each answered 429 with ``Retry-After``: requests a
second per credential (a token bucket, in each process), runs at once per credential (the
requests that run an agent, while they are answered, in each process), and model tokens a
UTC day per project (counted in the store, so across a fleet). The tokens each run uses are
added to its project's day (``UsageMeter``), which an admin reads at ``/v1/usage``: the runs
requests start and those started in the background (a message batch's, a scheduled
message's, ``billed_to_agent``), which a project over its day is refused too."""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..events import RunEnd
from ..hooks import StepRecord
from .credentials import ADMIN
from .middleware import ASGIApp, Receive, Scope, Send, reply

if TYPE_CHECKING:
    from ..store.sql import SqlStore

# The requests that run an agent (or a group of them).
RUNS = re.compile(r"^/v1/(?:(?:agents|conversations|groups)/[^/]+/messages(?:/stream|/async)?"
                  r"|chat/completions|voice-beta/[^/]+/chat/completions)$")
# Which meter (one per app) and project a run started here bills (set per request, and
# around starting a background run).
billed: ContextVar[tuple[UsageMeter, str] | None] = ContextVar("stateloop_billed",
                                                               default=None)


def today(now: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y-%m-%d")


def until_midnight(now: float) -> int:
    return 86400 - int(now) % 86400


class OverDailyTokens(Exception):
    """A project used its model tokens for the day: no run of it starts until midnight UTC."""


class UsageMeter:
    """A run watcher factory (``tracing.add_watcher``): each run this app starts for a
    project (``billed``) adds its model tokens to the project's day in the store; with
    ``daily_tokens``, a project whose day reached it is refused runs."""

    def __init__(self, store: SqlStore, daily_tokens: int | None = None) -> None:
        self.store = store
        self.daily_tokens = daily_tokens
        self.pending: set[asyncio.Task[None]] = set()

    async def refusal(self, project: str, now: float) -> str | None:
        """Why a run of ``project`` may not start ``now`` (None: it may). The tokens of runs
        that ended here are added first, so a run started right after another counts it."""
        if self.daily_tokens is None:
            return None
        if self.pending:
            await asyncio.wait(set(self.pending))
        used = await self.store.usage_on(project, today(now))
        if used < self.daily_tokens:
            return None
        return (f"project {project!r} used {used} model tokens today (UTC), its limit is "
                f"{self.daily_tokens} (STATELOOP_DAILY_TOKENS)")

    def watch(self, run_id: str, agent_id: str, model: str) -> _RunUsage:
        bill = billed.get()
        return _RunUsage(self, bill[1] if bill is not None and bill[0] is self else None)

    def add(self, project: str, tokens: int) -> None:
        task = asyncio.get_running_loop().create_task(
            self.store.add_usage(project, today(), tokens))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def close(self) -> None:
        await asyncio.gather(*self.pending, return_exceptions=True)


class _RunUsage:
    def __init__(self, meter: UsageMeter, project: str | None) -> None:
        self.meter, self.project = meter, project

    def step(self, record: StepRecord) -> None:
        pass

    def end(self, end: RunEnd) -> None:
        tokens = end.usage.input_tokens + end.usage.output_tokens
        if self.project is not None:
            self.meter.add(self.project, tokens)


@asynccontextmanager
async def billed_to_agent(meter: UsageMeter | None, agent_id: str) -> AsyncIterator[None]:
    """Around starting a run no request started (a batch's, a schedule's): the run's tokens
    go to its agent's project's day, and ``OverDailyTokens`` is raised instead when that
    project is over its daily limit. An agent that is gone bills no one (starting its run
    says it is gone)."""
    project = None if meter is None else await meter.store.agent_project(agent_id,
                                                                           by_name=False)
    if meter is None or project is None:
        yield
        return
    why = await meter.refusal(project, time.time())
    if why is not None:
        raise OverDailyTokens(why)
    bill = billed.set((meter, project))
    try:
        yield
    finally:
        billed.reset(bill)


class Limiter:
    """The limits, inside ``ServerMiddleware`` (which puts the caller in the scope)."""

    def __init__(self, app: ASGIApp, *, meter: list[UsageMeter], rate: float | None = None,
                 runs: int | None = None) -> None:
        self.app = app
        # filled when the app starts (the store opens then), if usage is counted at all; it
        # holds the daily limit
        self.meter = meter
        self.rate, self.runs = rate, runs
        self.buckets: dict[str, tuple[float, float]] = {}  # credential -> (tokens, at)
        self.running: defaultdict[str, int] = defaultdict(int)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held = scope.get("stateloop.access")
        principal = ADMIN if held is None else held.principal
        if not self.meter:
            await self._limited(scope, receive, send, principal.id, principal.project)
            return
        bill = billed.set((self.meter[0], principal.project))
        try:
            await self._limited(scope, receive, send, principal.id, principal.project)
        finally:
            billed.reset(bill)

    async def _limited(self, scope: Scope, receive: Receive, send: Send, who: str,
                       project: str) -> None:
        if self.rate is not None:
            wait = self._take(who, time.monotonic())
            if wait:
                await _too_many(send, wait, f"over {self.rate:g} requests a second for this "
                                "credential (STATELOOP_RATE_LIMIT)")
                return
        if scope["method"] != "POST" or not RUNS.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        if self.meter:
            now = time.time()
            why = await self.meter[0].refusal(project, now)
            if why is not None:
                await _too_many(send, until_midnight(now), why)
                return
        if self.runs is not None and self.running[who] >= self.runs:
            await _too_many(send, 1, f"this credential has {self.running[who]} runs under "
                            f"way, the most it may (STATELOOP_CONCURRENT_RUNS)")
            return
        self.running[who] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.running[who] -= 1
            if not self.running[who]:
                del self.running[who]

    def _take(self, who: str, now: float) -> int:
        """Take a request from ``who``'s bucket (a second's worth of requests, at least
        one); 0 when there was one, else the seconds until there is."""
        assert self.rate is not None
        size = max(1.0, self.rate)
        if len(self.buckets) > 10_000:  # buckets refilled long since are full: forget them
            self.buckets = {k: v for k, v in self.buckets.items() if now - v[1] < size / self.rate}
        tokens, at = self.buckets.get(who, (size, now))
        tokens = min(size, tokens + (now - at) * self.rate)
        if tokens >= 1:
            self.buckets[who] = (tokens - 1, now)
            return 0
        self.buckets[who] = (tokens, now)
        return max(1, math.ceil((1 - tokens) / self.rate))


async def _too_many(send: Send, seconds: int, why: str) -> None:
    headers: Any = [(b"retry-after", str(seconds).encode())]
    await reply(send, 429, f"too many requests: {why}; retry after {seconds} s", headers)
