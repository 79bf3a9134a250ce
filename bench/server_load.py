"""Server load: 100 agents messaged concurrently over HTTP through ``stateloop serve``, the fake
OpenAI server as model.

The model takes 50 ms per call (simulated; ``--model-latency 0`` for none). The baseline is
the same number of model calls made straight to the fake, with the same concurrency: what
the messages would cost with a server that added nothing. The server's overhead is its
latency minus that baseline.
Then one agent gets 10,000 stored messages and the round is repeated with it among the
others: their latency must not move. Each round also reports the server process's CPU time
per message (user + system, from /proc) and its resident memory at the end.

    .venv/bin/python bench/server_load.py [--agents 100] [--rounds 5] [--model-latency 0.05]
                                          [--profile FILE]

``--profile FILE`` runs the server under cProfile and writes its stats to FILE when it stops.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from stateloop.messages import assistant, user
from stateloop.store import open_store

MODEL_LATENCY = 0.05
_TICKS = os.sysconf("SC_CLK_TCK")


FAKE = """
import sys, threading
from stateloop.testing import reply
from stateloop.testing.fake_openai import FakeOpenAI
fake = FakeOpenAI(lambda request: reply("ok"), latency=float(sys.argv[1])).start()
print(fake.base_url, flush=True)
threading.Event().wait()
"""

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(code: str, *args: str, env: dict[str, str] | None = None,
          read_first_line: bool = False) -> subprocess.Popen[str]:
    """A Python subprocess: the fake and the server each get their own interpreter (and
    GIL), so the benchmark's client does not slow them down."""
    return subprocess.Popen([sys.executable, "-c", code, *args], text=True,
                            stdout=subprocess.PIPE if read_first_line else subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})


def wait_healthy(url: str) -> None:
    deadline = time.time() + 120  # a profiled server on a busy machine starts slowly
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/v1/health/").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server at {url} did not start")


def serve(db_url: str, fake_url: str, profile: str | None = None
          ) -> tuple[subprocess.Popen[bytes], str]:
    """``stateloop serve`` on ``db_url`` with the fake as its model, answering: the process and
    its URL. With ``profile``, under cProfile, its stats written to that file when it stops
    (on SIGINT)."""
    port = free_port()
    command = [sys.executable, "-m", "stateloop", "serve", "--port", str(port)]
    if profile:
        command[1:1] = ["-m", "cProfile", "-o", profile]
    server = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "STATELOOP_DATABASE_URL": db_url,
             "STATELOOP_MODEL_BASE_URL": fake_url, "STATELOOP_MODEL_API_KEY": "test"})
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url)
    return server, url


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def baseline(fake_url: str, agents: int, rounds: int) -> list[float]:
    """Latency of a bare streamed model call, ``agents`` at a time."""
    body = {"model": "gpt-4o-mini", "stream": True,
            "messages": [{"role": "user", "content": "hello"}]}
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=500)) as http:

        async def one_agent() -> list[float]:
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                async with http.stream("POST", f"{fake_url}/chat/completions", json=body,
                                       headers={"Authorization": "Bearer test",
                                                "Connection": "close"}) as response:
                    async for _ in response.aiter_bytes():
                        pass
                times.append(time.perf_counter() - started)
            return times

        results = await asyncio.gather(*(one_agent() for _ in range(agents)))
    return [t for agent in results for t in agent]


RETRIES = [0]  # connections the server dropped under load (each request retried once)


async def post_retrying(http: httpx.AsyncClient, url: str, body: dict[str, object]
                        ) -> httpx.Response:
    try:
        response = await http.post(url, json=body)
    except httpx.TransportError:
        RETRIES[0] += 1
        response = await http.post(url, json=body)
    response.raise_for_status()
    return response


async def message_all(http: httpx.AsyncClient, url: str, agent_ids: list[str],
                      rounds: int) -> tuple[dict[str, list[float]], float]:
    """Each agent gets ``rounds`` messages one after another, all agents at once."""

    async def one_agent(agent_id: str) -> list[float]:
        times = []
        for i in range(rounds):
            started = time.perf_counter()
            response = await post_retrying(http, f"{url}/v1/agents/{agent_id}/messages",
                                           {"messages": [{"role": "user",
                                                          "content": f"message {i}"}]})
            assert response.json()["stop_reason"]["stop_reason"] == "end_turn"
            times.append(time.perf_counter() - started)
        return times

    started = time.perf_counter()
    results = await asyncio.gather(*(one_agent(a) for a in agent_ids))
    return dict(zip(agent_ids, results, strict=True)), time.perf_counter() - started


async def fill_history(url: str, agent_id: str, count: int) -> None:
    """Store ``count`` old messages for the agent (recall history, not in context)."""
    store = await open_store(url)
    try:
        for start in range(0, count, 1000):
            batch = []
            for i in range(start, min(count, start + 1000), 2):
                batch += [user(f"old question {i}"), assistant(f"old answer {i}")]
            await store.append_step(agent_id, batch)
    finally:
        await store.close()


def report(label: str, times: list[float], elapsed: float, base_p50: float,
           cpu: float | None = None) -> None:
    p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
    print(f"{label:<28} {len(times) / elapsed:8.1f} msg/s   p50 {p50 * 1000:7.1f} ms   "
          f"p99 {p99 * 1000:7.1f} ms   overhead p50 {(p50 - base_p50) * 1000:6.1f} ms "
          f"({p50 / base_p50:.2f}x baseline)"
          + (f"   server CPU {cpu * 1000 / len(times):.2f} ms/msg" if cpu is not None else ""))


async def main(agents: int, rounds: int, model_latency: float, profile: str | None) -> None:
    fake = spawn(FAKE, str(model_latency), read_first_line=True)
    server: subprocess.Popen[bytes] | None = None
    try:
        assert fake.stdout is not None
        fake_url = fake.stdout.readline().strip()
        base = await baseline(fake_url, agents, rounds)
        base_p50 = statistics.median(base)
        print(f"{'baseline (model calls only)':<28} p50 {base_p50 * 1000:7.1f} ms   "
              f"p99 {percentile(base, 0.99) * 1000:7.1f} ms   "
              f"(simulated model latency {model_latency * 1000:.0f} ms)")
        db_url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
        server, url = serve(db_url, fake_url, profile)
        await load(url, db_url, agents, rounds, base_p50, server.pid)
    finally:
        if server is not None:
            server.send_signal(signal.SIGINT)  # uvicorn's clean stop: cProfile writes its stats
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        fake.terminate()
        fake.wait(timeout=10)


async def load(url: str, db_url: str, agents: int, rounds: int, base_p50: float,
               pid: int) -> None:
    """The two rounds: ``agents`` agents, then the same with a 10,000-message agent."""
    limits = httpx.Limits(max_connections=agents + 10)
    memory = [f"started {rss_mb(pid):.0f}"]
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        ids: list[str] = []
        for i in range(agents + 1):
            created = await http.post(f"{url}/v1/agents/", json={
                "name": f"bench-{i}", "model": "openai/gpt-4o-mini",
                "memory_blocks": [{"label": "human", "value": f"user {i}"}]})
            created.raise_for_status()
            ids.append(created.json()["id"])
        heavy, others = ids[0], ids[1:]
        memory.append(f"{len(ids)} agents made {rss_mb(pid):.0f}")
        await message_all(http, url, others, 1)  # warm up: load agents, open connections
        memory.append(f"each messaged once {rss_mb(pid):.0f}")
        cpu = cpu_seconds(pid)
        times, elapsed = await message_all(http, url, others, rounds)
        before = [t for agent in times.values() for t in agent]
        report(f"{agents} agents", before, elapsed, base_p50, cpu_seconds(pid) - cpu)

        memory.append(f"{rounds} rounds {rss_mb(pid):.0f}")
        await fill_history(db_url, heavy, 10_000)
        listed = await http.get(f"{url}/v1/agents/{heavy}/messages", params={"limit": 1})
        assert listed.status_code == 200
        cpu = cpu_seconds(pid)
        times, elapsed = await message_all(http, url, [heavy, *others], rounds)
        cpu = cpu_seconds(pid) - cpu
        after = [t for agent_id in others for t in times[agent_id]]
        report(f"{agents} agents + 10k-history", after, elapsed, base_p50)
        report("  the 10k-history agent", times[heavy], elapsed, base_p50)
        print(f"server CPU over the whole round: {cpu * 1000 / (len(after) + rounds):.2f} ms "
              f"a message; resident memory after {agents + 1} agents: {rss_mb(pid):.0f} MB")
        print(f"resident memory (MB) when {', '.join(memory)}")
        slowdown = percentile(after, 0.99) / percentile(before, 0.99)
        print(f"others' p99 with the 10k-history agent: {slowdown:.2f}x without it; "
              f"{RETRIES[0]} requests retried after a dropped connection")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model-latency", type=float, default=MODEL_LATENCY,
                        help="seconds the fake model takes per call")
    parser.add_argument("--profile", help="run the server under cProfile, stats to this file")
    args = parser.parse_args()
    asyncio.run(main(args.agents, args.rounds, args.model_latency, args.profile))
    sys.exit(0)
