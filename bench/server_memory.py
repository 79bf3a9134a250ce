"""Resident memory of ``stateloop serve``: idle (started, health answered), then after it has
answered ``--agents`` agents one message each (all at once, as ``server_load.py`` sends them),
with the fake OpenAI server as model. Also which heavy libraries the server process has
mapped, and the time of ``import stateloop`` in a fresh interpreter.

    .venv/bin/python bench/server_memory.py [--agents 100] [--bound 150] [--new-database]

The database is migrated before the server starts (a restarted server's case); with
``--new-database`` the server creates it, and so also holds the migration code (~10 MB).

``--bound MB`` exits 1 when the RSS after the agents exceeds it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from server_load import FAKE, message_all, rss_mb, serve, spawn
from stateloop.store import open_store

# Shared objects whose presence in the process's maps says the library was imported.
LIBRARIES = {"numpy": "numpy", "onnxruntime": "onnxruntime", "tokenizers": "tokenizers",
             "tiktoken": "tiktoken", "psycopg": "psycopg", "pypdf": "pypdf"}


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def mapped(pid: int) -> list[str]:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return [name for name, marker in LIBRARIES.items() if f"/{marker}" in maps]


def import_time(runs: int = 5) -> tuple[float, float]:
    """Median wall and CPU time of ``import stateloop`` in a fresh interpreter, in ms."""
    code = ("import time; t, c = time.perf_counter(), time.process_time(); import stateloop; "
            "print(time.perf_counter() - t, time.process_time() - c)")
    times = [[float(x) for x in subprocess.run([sys.executable, "-c", code], text=True,
                                               capture_output=True, check=True).stdout.split()]
             for _ in range(runs)]
    return (statistics.median(t[0] for t in times) * 1000,
            statistics.median(t[1] for t in times) * 1000)


async def main(agents: int, bound: float | None, new_database: bool) -> int:
    wall, cpu = import_time()
    print(f"import stateloop: {wall:.0f} ms, {cpu:.0f} ms of CPU (medians of 5 interpreters)")
    fake = spawn(FAKE, "0", read_first_line=True)
    server: subprocess.Popen[bytes] | None = None
    try:
        assert fake.stdout is not None
        fake_url = fake.stdout.readline().strip()
        db_url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
        if not new_database:
            await (await open_store(db_url)).close()
        server, url = serve(db_url, fake_url)
        time.sleep(0.5)
        idle = rss_mb(server.pid)
        print(f"idle:                 {idle:6.1f} MB  libraries: "
              f"{', '.join(mapped(server.pid)) or 'none'}")
        limits = httpx.Limits(max_connections=agents + 10)
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            ids = []
            for i in range(agents):
                created = await http.post(f"{url}/v1/agents/", json={
                    "name": f"bench-{i}", "model": "openai/gpt-4o-mini",
                    "memory_blocks": [{"label": "human", "value": f"user {i}"}]})
                created.raise_for_status()
                ids.append(created.json()["id"])
            await message_all(http, url, ids[:1], 1)
            first = rss_mb(server.pid)
            print(f"after one message:    {first:6.1f} MB  libraries: "
                  f"{', '.join(mapped(server.pid)) or 'none'}")
            await message_all(http, url, ids, 1)
        after = rss_mb(server.pid)
        print(f"after {agents} agents:     {after:6.1f} MB  libraries: "
              f"{', '.join(mapped(server.pid)) or 'none'}; {threads(server.pid)} threads")
        if bound is not None and after > bound:
            print(f"over the bound of {bound:.0f} MB")
            return 1
        return 0
    finally:
        for process in (server, fake):
            if process is not None:
                process.terminate()
                process.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--bound", type=float, default=None, help="MB after the agents")
    parser.add_argument("--new-database", action="store_true",
                        help="the server creates the database (runs the migrations)")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.agents, args.bound, args.new_database)))
