"""Tools from source against a real server on loopback, real bubblewrap: a source over the
size limit is refused at once and one being parsed never stalls the server; a source the
parser chokes on is a 4xx; binding a tool runs none of its code, and deleting its agent
stops its workers; a reply the tool forges is its own error, and its agent carries on."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from letta_client import Letta

from fake_script import Script
from patience import ANSWERS
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from stateloop.tools.worker import CHILD_SCRIPT
from test_cli_support import Cli, base_env, cli, fake, script, serving  # noqa: F401 (fixtures)
from test_server_support import new_agent

SOURCE_BYTES = 1_000_000  # the default of STATELOOP_TOOL_SOURCE_BYTES


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``stateloop serve`` in a process of its own (no GIL shared with the test's clients);
    its URL. A parse of a source near the limit takes seconds on a loaded machine: the
    timeout (of calls, and of parses) leaves it room."""
    home = tmp_path_factory.mktemp("serve")
    env = base_env(home)
    env.update(STATELOOP_DATABASE_URL=f"sqlite:///{home / 'stateloop.db'}",
               OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="test",
               STATELOOP_EMBEDDING="openai/text-embedding-3-small",
               STATELOOP_TOOL_TIMEOUT="60", STATELOOP_TOOL_MEMORY_MB="256")
    with serving(Cli(env, home / "stateloop.db")) as url:
        yield url


@pytest.fixture
def client(server: str, script: Script) -> Letta:
    script.set()
    return Letta(base_url=server, api_key="unused", max_retries=0, timeout=60)


def _code(size: int, last: str = "tool") -> str:
    """Ordinary Python of about ``size`` bytes: many small functions, then ``last``."""
    unit = ('def helper_{0}(a: int, b: str = "x") -> str:\n    """Helper {0}."""\n'
            '    values = [a * k for k in range(10) if k % 2]\n'
            '    return b.join(str(v) for v in values)\n\n\n')
    parts, total = [], 0
    while total < size:
        parts.append(unit.format(len(parts)))
        total += len(parts[-1])
    parts.append(f'def {last}(query: str, limit: int = 3) -> str:\n    """Search."""\n'
                 f'    return query * limit\n')
    return "".join(parts)


class HealthProbe:
    """Polls /v1/health from a thread of its own; ``slowest`` is the longest answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.times: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while not self._stop.is_set():
                start = time.monotonic()
                try:
                    status = http.get("/v1/health").status_code
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                    continue
                self.times.append(time.monotonic() - start)
                if status != 200:
                    self.failures.append(f"status {status}")
                self._stop.wait(0.05)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=40)

    @property
    def slowest(self) -> float:
        return max(self.times)


def _noise(url: str) -> float:
    """The slowest of a second of /v1/health polls on an idle server: what the machine's
    load alone costs, allowed on top of the 1 s bound."""
    with HealthProbe(url) as quiet:
        time.sleep(1)
    return quiet.slowest


def _post(server: str, path: str, body: dict[str, Any]) -> tuple[httpx.Response, float]:
    content = json.dumps(body).encode()
    start = time.monotonic()
    response = httpx.post(server + path, content=content, timeout=120,
                          headers={"content-type": "application/json"})
    return response, time.monotonic() - start


ROUTES = [("/v1/tools", "source_code", {}), ("/v1/tools/run", "source_code", {"args": {}}),
          ("/v1/tools/generate-schema", "code", {})]


@pytest.mark.parametrize(("path", "field", "extra"), ROUTES)
def test_a_source_over_the_limit_is_refused_at_once_and_health_answers(
        server: str, path: str, field: str, extra: dict[str, Any]) -> None:
    body = json.dumps({field: _code(7_600_000), **extra}).encode()  # stalled 17-33 s
    noise = _noise(server)
    with HealthProbe(server) as probe:
        start = time.monotonic()
        response = httpx.post(server + path, content=body, timeout=120,
                              headers={"content-type": "application/json"})
        took = time.monotonic() - start
        time.sleep(0.3)  # a few polls after the answer too
    assert response.status_code == 413, response.text
    assert f"more than the {SOURCE_BYTES}" in response.text
    assert "STATELOOP_TOOL_SOURCE_BYTES" in response.text
    assert took < 5, took  # the body's transfer and JSON only: no parse
    assert not probe.failures and probe.times
    assert probe.slowest < 1.0 + noise, (noise, probe.times)


def test_a_source_at_the_limit_is_parsed_off_the_event_loop(server: str) -> None:
    source = _code(SOURCE_BYTES - 2_000, last="near_the_limit")
    assert len(source.encode()) <= SOURCE_BYTES
    noise = _noise(server)
    with HealthProbe(server) as probe:
        response, took = _post(server, "/v1/tools/generate-schema", {"code": source})
    assert response.status_code == 200, response.text
    assert response.json()["name"] == "near_the_limit"
    assert response.json()["parameters"]["required"] == ["query"]
    # The parse took its time (seconds on a loaded machine) while health answered throughout.
    assert len(probe.times) >= 3 and not probe.failures
    assert probe.slowest < 1.0 + noise, (took, noise, probe.times)


NESTED = {
    "parentheses": "(" * 100_000,
    "unary minus": "x = " + "-" * 100_000 + "1",
    "a long sum": "x = " + "+".join(["1"] * 100_000) + "\n\ndef f() -> int:\n    return x\n",
    "nots": "x = " + "not " * 100_000 + "1",
    "calls": "x = f" + "()" * 100_000,
    "a deep hint": "def f(a: " + " | ".join(["int"] * 300) + ") -> str:\n    return ''\n",
    "a deep default": "def f(a: int = " + "-" * 500 + "1) -> str:\n    return ''\n",
}


@pytest.mark.parametrize("source", NESTED.values(), ids=list(NESTED))
@pytest.mark.parametrize(("path", "field", "extra"), ROUTES)
def test_a_source_too_deep_to_parse_is_a_4xx(server: str, source: str, path: str,
                                             field: str, extra: dict[str, Any]) -> None:
    response, _ = _post(server, path, {field: source, **extra})
    assert 400 <= response.status_code < 500, response.text
    detail = response.text
    assert ("nests" in detail or "does not compile" in detail
            or "could not be parsed" in detail), detail
    assert httpx.get(server + "/v1/health", timeout=ANSWERS).status_code == 200


# -- workers start with a call and stop with their agent ----------------------------------

BALLAST_MB = 120
BALLAST = f"""
BALLAST = b"x" * {BALLAST_MB} * 1024 * 1024  # resident from the start

def ballast_probe() -> str:
    \"\"\"Say how much is held.\"\"\"
    return str(len(BALLAST))
"""


def _memory_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _heavy_workers() -> dict[int, float]:
    """The processes of this checkout's sandboxes holding the ballast (a zygote, and the
    child it forked ahead of the next call, sharing its pages): pid -> PSS in MB."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if CHILD_SCRIPT.encode() not in (entry / "cmdline").read_bytes():
                continue
            if _memory_mb(int(entry.name), "Rss") > BALLAST_MB * 0.8:
                found[int(entry.name)] = _memory_mb(int(entry.name), "Pss")
        except (OSError, ValueError):
            continue  # gone meanwhile
    return found


def _until(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_workers_start_at_the_first_call_and_stop_when_their_agent_is_deleted(
        server: str, client: Letta, script: Script) -> None:
    client.tools.upsert(source_code=BALLAST)
    assert not _heavy_workers()
    agents = [new_agent(client, tools=["ballast_probe"]) for _ in range(4)]
    for agent in agents:  # loaded: each binds the tool
        assert httpx.get(f"{server}/v1/agents/{agent.id}/context").status_code == 200
    time.sleep(2)  # a start would show by now
    assert not _heavy_workers(), "a worker started before any call"
    for agent in agents:
        script.set(call("ballast_probe"), reply("done"))
        response = client.agents.messages.create(agent.id, input="go")
        [returned] = [m for m in response.messages if m.message_type == "tool_return_message"]
        assert returned.tool_return == str(BALLAST_MB * 1024 * 1024)
    held = sum(_heavy_workers().values())
    assert 3.2 * BALLAST_MB < held < 6 * BALLAST_MB, held  # a warm worker per agent's tool
    for agent in agents:
        client.agents.delete(agent.id)
    assert _until(lambda: not _heavy_workers(), 10), _heavy_workers()


# -- the reply channel ----------------------------------------------------------------------

FORGED = b'{"ok": true, "result": "r", "stdout": 12345}'


def test_a_reply_frame_printed_to_fd_1_is_only_what_the_tool_printed(
        client: Letta, script: Script) -> None:
    client.tools.upsert(source_code=(
        "def print_a_frame() -> str:\n    \"\"\"Print a reply frame, then return.\"\"\"\n"
        "    import os\n"
        f"    os.write(1, {FORGED!r})\n"
        "    return 'real'\n"))
    agent = new_agent(client, tools=["print_a_frame"])
    script.set(call("print_a_frame"), reply("done"))
    response = client.agents.messages.create(agent.id, input="go")
    [returned] = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert (returned.status, returned.tool_return) == ("success", "real")
    assert returned.stdout == [FORGED.decode()]


@pytest.mark.parametrize("frame", [
    FORGED, b'{"ok": true, "result": 12345}', b'{"ok": false, "message": "m"}',
    b'{"ok": "yes", "result": "r"}', b"[1, 2]", b"not json"])
def test_a_malformed_reply_is_the_tools_error_and_the_agent_carries_on(
        client: Letta, script: Script, frame: bytes) -> None:
    # The tool writes the frame to every descriptor it has beyond 0-2 (its reply channel
    # among them) and exits before its real reply.
    client.tools.upsert(source_code=(
        "def forge_reply() -> str:\n    \"\"\"Forge the reply.\"\"\"\n    import os\n"
        "    for fd in sorted(map(int, os.listdir('/proc/self/fd'))):\n"
        "        if fd > 2:\n"
        "            try:\n"
        f"                os.write(fd, {frame!r})\n"
        "            except OSError:\n"
        "                pass\n"
        "    os._exit(0)\n"))
    agent = new_agent(client, tools=["forge_reply"])
    script.set(call("forge_reply"), reply("done"))
    response = client.agents.messages.create(agent.id, input="go")
    [returned] = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert returned.status == "error"
    assert "malformed reply" in returned.tool_return
    script.set(reply("still here"))
    later = client.agents.messages.create(agent.id, input="and now?")
    assert [m.content for m in later.messages
            if m.message_type == "assistant_message"] == ["still here"]
