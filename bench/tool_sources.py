"""What hostile tool sources cost a running server, through its API only (so it measures an
older checkout too: ``PYTHONPATH=/other/src``).

- a 7.6 MB source sent to ``POST /v1/tools``: the answer and its time, and the slowest
  ``/v1/health`` answer meanwhile (polled every 50 ms from a thread);
- sources nested too deep for CPython's parser, on the three routes that read sources:
  the statuses;
- four agents with a tool whose module code holds 250 MB: the memory (RSS summed, and PSS)
  of the server's sandbox processes once the agents are loaded, after one call each, and
  after the agents are deleted; the first call's and a second call's time;
- a tool that writes a reply frame to its fd 1 and one that writes a malformed frame to its
  reply channel: what the call answers, and whether the agent's next message works.

    PYTHONPATH=src .venv/bin/python bench/tool_sources.py [--skip-large]

``--skip-large`` leaves the 7.6 MB source out (an older checkout may take many minutes on it).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply

BALLAST_MB = 250


def _script(request: Any) -> Any:
    """``call:NAME`` from the user calls NAME; anything after a tool result is a reply."""
    last = request.messages[-1]
    if last.role == "user" and (last.text or "").startswith("call:"):
        return call(last.text.removeprefix("call:"))
    return reply("done")


def _big_source(size: int) -> str:
    unit = ('def helper_{0}(a: int, b: str = "x") -> str:\n    """Helper {0}."""\n'
            '    values = [a * k for k in range(10) if k % 2]\n'
            '    return b.join(str(v) for v in values)\n\n\n')
    parts: list[str] = []
    while sum(map(len, parts)) < size:
        parts.append(unit.format(len(parts)))
    return "".join(parts) + 'def tool(q: str) -> str:\n    """Echo."""\n    return q\n'


class Probe(threading.Thread):
    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.times, self.stop = url, [], threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=600) as http:
            while not self.stop.is_set():
                start = time.monotonic()
                http.get("/v1/health")
                self.times.append(time.monotonic() - start)
                self.stop.wait(0.05)


def _sandboxes(server_pid: int) -> list[int]:
    """The server's sandbox processes (its descendants running sandbox_child.py)."""
    parents: dict[int, int] = {}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            if b"sandbox_child.py" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    mine = []
    for pid in found:
        walk = pid
        while walk in parents and walk != server_pid:
            walk = parents[walk]
        if walk == server_pid:
            mine.append(pid)
    return mine


def _memory(server_pid: int) -> tuple[int, float, float]:
    """(processes, RSS MB summed, PSS MB summed) of the server's sandboxes."""
    pids, rss, pss = _sandboxes(server_pid), 0.0, 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) / 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) / 1024
        except OSError:
            continue
    return len(pids), rss, pss


def _described(server_pid: int) -> str:
    count, rss, pss = _memory(server_pid)
    return f"{count} processes, RSS {rss:.0f} MB, PSS {pss:.0f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-large", action="store_true")
    skip_large = parser.parse_args().skip_large
    fake = FakeOpenAI(_script).start()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    home = Path(tempfile.mkdtemp())
    env = {**os.environ, "HOME": str(home),
           "STATELOOP_DATABASE_URL": f"sqlite:///{home / 'bench.db'}",
           "STATELOOP_MODEL_BASE_URL": fake.base_url, "STATELOOP_MODEL_API_KEY": "test",
           "STATELOOP_EMBEDDING": "openai/text-embedding-3-small"}
    server = subprocess.Popen([sys.executable, "-m", "stateloop", "serve", "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    http = httpx.Client(base_url=url, timeout=600)
    try:
        deadline = time.time() + 60
        while True:
            try:
                if http.get("/v1/health").status_code == 200:
                    break
            except httpx.HTTPError:
                if time.time() > deadline:
                    raise
            time.sleep(0.2)
        sections(http, url, server.pid, skip_large)
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:  # stuck in a parse
            server.kill()
            server.wait()
        fake.stop()


def sections(http: httpx.Client, url: str, server_pid: int, skip_large: bool) -> None:
    if not skip_large:
        large_source(http, url)
    nested_sources(http)
    module_memory(http, server_pid)
    forged_replies(http)


def large_source(http: httpx.Client, url: str) -> None:
    body = json.dumps({"source_code": _big_source(7_600_000)}).encode()
    probe = Probe(url)
    probe.start()
    start = time.monotonic()
    response = http.post("/v1/tools", content=body, headers={"content-type": "application/json"})
    took = time.monotonic() - start
    time.sleep(0.3)
    probe.stop.set()
    probe.join()
    print(f"7.6 MB source: {response.status_code} in {took:.2f} s; health slowest "
          f"{max(probe.times):.2f} s over {len(probe.times)} polls")


def nested_sources(http: httpx.Client) -> None:
    nested = {"parentheses": "(" * 100_000, "unary minus": "x = " + "-" * 100_000 + "1",
              "long sum": "x = " + "+".join(["1"] * 100_000),
              "deep hint": "def f(a: " + " | ".join(["int"] * 300) + ") -> str:\n    return ''\n"}
    for label, source in nested.items():
        codes = [http.post("/v1/tools", json={"source_code": source}).status_code,
                 http.post("/v1/tools/run", json={"source_code": source, "args": {}}).status_code,
                 http.post("/v1/tools/generate-schema", json={"code": source}).status_code]
        print(f"nested ({label}): create/run/generate-schema -> {codes}")


def module_memory(http: httpx.Client, server_pid: int) -> None:
    ballast = (f'BALLAST = b"x" * {BALLAST_MB} * 1024 * 1024\n\n'
               'def ballast_probe() -> str:\n    """Hold."""\n    return str(len(BALLAST))\n')
    http.post("/v1/tools", json={"source_code": ballast}).raise_for_status()
    agents = [http.post("/v1/agents", json={
        "name": f"ballast-{index}", "model": "openai/gpt-4o-mini", "include_base_tools": False,
        "tools": ["ballast_probe"]}).json()["id"] for index in range(4)]
    for agent_id in agents:
        http.get(f"/v1/agents/{agent_id}/context").raise_for_status()
    time.sleep(5)
    print("4 agents loaded, no call: " + _described(server_pid))
    firsts, seconds = [], []
    for agent_id in agents:
        for timings in (firsts, seconds):
            start = time.monotonic()
            http.post(f"/v1/agents/{agent_id}/messages", json={
                "messages": [{"role": "user", "content": "call:ballast_probe"}]}
            ).raise_for_status()
            timings.append(time.monotonic() - start)
    print("after a call each: " + _described(server_pid))
    print(f"message with a call: first {sorted(firsts)} s, second {sorted(seconds)} s")
    for agent_id in agents:
        http.delete(f"/v1/agents/{agent_id}").raise_for_status()
    start = time.monotonic()
    while _memory(server_pid)[0] and time.monotonic() - start < 20:
        time.sleep(0.05)
    print(f"agents deleted: {_described(server_pid)} "
          f"({time.monotonic() - start:.2f} s after the deletes)")


def forged_replies(http: httpx.Client) -> None:
    frame = b'{"ok": true, "result": "r", "stdout": 12345}'
    to_fd1 = (f"def forge_fd1() -> str:\n    \"\"\"Forge.\"\"\"\n    import os\n"
              f"    os.write(1, {frame!r})\n    return 'real'\n")
    to_all = (f"def forge_all() -> str:\n    \"\"\"Forge.\"\"\"\n    import os\n"
              f"    for fd in sorted(map(int, os.listdir('/proc/self/fd'))):\n"
              f"        if fd > 0:\n            try:\n                os.write(fd, {frame!r})\n"
              f"            except OSError:\n                pass\n    os._exit(0)\n")
    for name, source in (("forge_fd1", to_fd1), ("forge_all", to_all)):
        http.post("/v1/tools", json={"source_code": source}).raise_for_status()
        agent_id = http.post("/v1/agents", json={
            "name": name, "model": "openai/gpt-4o-mini", "include_base_tools": False,
            "tools": [name]}).json()["id"]
        first = http.post(f"/v1/agents/{agent_id}/messages", json={
            "messages": [{"role": "user", "content": f"call:{name}"}]})
        answered = (first.status_code, [
            (m.get("status"), m.get("tool_return")) for m in first.json().get("messages", [])
            if m.get("message_type") == "tool_return_message"] if first.status_code == 200
            else first.text[:100])
        later = http.post(f"/v1/agents/{agent_id}/messages", json={
            "messages": [{"role": "user", "content": "hello"}]})
        print(f"{name}: call -> {answered}; next message -> {later.status_code}")


if __name__ == "__main__":
    main()
