"""What an API client can make the server do through its MCP routes, and what it cannot.

By default no client starts a process (stdio servers are refused, naming the setting) nor
reaches a loopback, private or link-local address. Where the operator allows a command, it
runs in the tools' sandbox with only its own environment; every message from a server and
every result is bounded; a server whose tool list cannot be read fails fast and is stopped;
a target's reply is never quoted back.
"""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from letta_client import Letta

from mcp_support import demo_command, http_demo, surrogate_command
from stateloop.mcp import MCPConnectionError, MCPTools
from stateloop.testing import call, reply
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import (  # noqa: F401 (fixtures)
    Script,
    Server,
    client,
    fake,
    new_agent,
    script,
    server,
    settings_for,
)

SANDBOX_ENV = {"HOME", "TMPDIR", "PATH", "LANG", "PWD", "DEMO_SECRET"}


class Target:
    """A loopback HTTP server that records each request and answers ``status`` with
    ``body``: something an MCP URL could point at."""

    def __init__(self, status: int = 200, body: bytes = b"{}",
                 content_type: str = "application/json") -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        target = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                target.requests.append((self.command, self.path, dict(self.headers)))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Target:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def commands(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Allowed commands: the demo server, a copy of it for the deep schema, and the server
    that lists a lone surrogate (each its own file, so its processes can be told apart)."""
    return {"demo": demo_command(tmp_path_factory.mktemp("demo")),
            "deep": demo_command(tmp_path_factory.mktemp("deep")),
            "surrogate": surrogate_command(tmp_path_factory.mktemp("surrogate"))}


@pytest.fixture(scope="module")
def closed_server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[Server]:
    """The default settings: no stdio servers, no private addresses."""
    with Server(settings_for(fake, tmp_path_factory.mktemp("closed") / "db")) as running:
        yield running


@pytest.fixture(scope="module")
def open_server(fake: FakeOpenAI, commands: dict[str, str],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The operator allows the commands of ``commands`` and servers on loopback."""
    db = tmp_path_factory.mktemp("open") / "stateloop.db"
    settings = settings_for(fake, db, mcp_stdio_commands=list(commands.values()),
                            mcp_private_urls=True)
    with Server(settings) as running:
        yield running


def plain(server: Server) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=120)


def stdio_bodies(name: str, command: str, args: list[str]) -> list[tuple[str, str, Any]]:
    """Every request that takes a stdio server's config and could start it."""
    legacy = {"server_name": name, "type": "stdio", "command": command, "args": args}
    return [("POST", "/v1/mcp-servers", {"server_name": name, "config": {
                "mcp_server_type": "stdio", "command": command, "args": args}}),
            ("PUT", "/v1/tools/mcp/servers", legacy),
            ("POST", "/v1/tools/mcp/servers/test", legacy),
            ("POST", "/v1/tools/mcp/servers/connect", legacy)]


def test_no_api_client_starts_a_process_by_default(closed_server: Server,
                                                   tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    with plain(closed_server) as http:
        for method, path, body in stdio_bodies("sh", "/bin/sh", ["-c", f"touch {ran}"]):
            answer = http.request(method, path, json=body)
            assert answer.status_code == 403, (path, answer.text)
            assert "STATELOOP_MCP_STDIO_COMMANDS" in answer.json()["detail"]
        assert http.get("/v1/mcp-servers").json() == []  # nothing stored
        assert http.get("/v1/tools/mcp/servers").json() == {}
    time.sleep(1)  # a started shell would have touched the file by now
    assert not ran.exists()


def test_private_addresses_are_refused_and_never_reached(closed_server: Server) -> None:
    with Target() as target, plain(closed_server) as http:
        port = target.port
        urls = [f"http://127.0.0.1:{port}/mcp?token=1", f"http://localhost:{port}/mcp",
                f"http://[::1]:{port}/mcp", f"http://0.0.0.0:{port}/mcp",
                "http://169.254.169.254/latest/meta-data", "http://10.1.2.3/mcp",
                "http://192.168.1.1/mcp", "http://[fe80::1]/mcp", "http://[::ffff:127.0.0.1]/"]
        for url in urls:
            for kind in ("streamable_http", "sse"):
                answer = http.post("/v1/mcp-servers", json={"server_name": "near", "config": {
                    "mcp_server_type": kind, "server_url": url,
                    "custom_headers": {"Cookie": "session=abc"}}})
                assert answer.status_code == 403, (url, answer.text)
                assert "STATELOOP_MCP_PRIVATE_URLS" in answer.json()["detail"]
            legacy = {"server_name": "near", "type": "streamable_http", "server_url": url}
            for path in ("/v1/tools/mcp/servers/test", "/v1/tools/mcp/servers/connect"):
                assert http.post(path, json=legacy).status_code == 403
            assert http.put("/v1/tools/mcp/servers", json=legacy).status_code == 403
        assert http.get("/v1/mcp-servers").json() == []
    assert target.requests == []


async def test_every_connection_checks_the_address_it_goes_to() -> None:
    """A name is checked as it is connected to, not only when the server is stored: one
    resolving to 127.0.0.1 is refused, so no redirect or second lookup reaches loopback."""
    with Target() as target:
        server = dataclasses.replace(MCPTools.http(f"http://localhost:{target.port}/mcp"),
                                     public_only=True)
        with pytest.raises(MCPConnectionError, match="loopback, private or link-local"):
            await server.list_tools()
        await server.close()
    assert target.requests == []


def test_an_allowed_command_runs_in_the_sandbox_with_its_own_environment(
        open_server: Server, commands: dict[str, str], tmp_path_factory: Any) -> None:
    host_environ = {entry for entry in Path("/proc/self/environ").read_bytes()
                    .decode(errors="replace").split("\0") if "=" in entry}
    server_files = [str(Path(__file__).resolve()), str(Path.cwd() / "pyproject.toml")]
    with plain(open_server) as http:
        created = http.post("/v1/mcp-servers", json={"server_name": "boxed", "config": {
            "mcp_server_type": "stdio", "command": commands["demo"], "args": [],
            "env": {"DEMO_SECRET": "given"}}}).json()
        tools = {t["name"]: t for t in http.get(f"/v1/mcp-servers/{created['id']}/tools").json()}
        ran = http.post(f"/v1/mcp-servers/{created['id']}/tools/{tools['inspect']['id']}/run",
                        json={"args": {"paths": server_files}}).json()
        assert ran["status"] == "success", ran
        seen = json.loads(ran["func_return"])
        assert set(seen["env"]) <= SANDBOX_ENV and seen["env"]["DEMO_SECRET"] == "given"
        assert seen["cwd"] == "/tmp" and seen["exists"] == []  # not the server's directory
        leaked = [entry for entry in host_environ if entry in seen["parent_environ"]
                  and entry.partition("=")[0] not in SANDBOX_ENV]
        assert leaked == []  # /proc/$PPID/environ is the sandbox's, not the server's
        if os.geteuid() == 0:
            assert seen["uid"] != 0

        # Allowed means this command, as written: another one, or a change to one, is not.
        for method, path, body in stdio_bodies("sh", "/bin/sh", ["-c", "id"]):
            answer = http.request(method, path, json=body)
            assert answer.status_code == 403 and "'/bin/sh'" in answer.json()["detail"]
        changed = http.patch(f"/v1/mcp-servers/{created['id']}", json={"config": {
            "mcp_server_type": "stdio", "command": "/bin/sh"}})
        assert changed.status_code == 403
        assert "STATELOOP_MCP_STDIO_COMMANDS" in changed.json()["detail"]
        legacy = http.patch("/v1/tools/mcp/servers/boxed", json={"stdio_config": {
            "server_name": "boxed", "command": "/bin/sh", "args": []}})
        assert legacy.status_code == 403
        assert http.get(f"/v1/mcp-servers/{created['id']}").json()["command"] == commands["demo"]
        http.delete(f"/v1/mcp-servers/{created['id']}")


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def test_results_are_bounded(open_server: Server, commands: dict[str, str], script: Script
                             ) -> None:
    client = Letta(base_url=open_server.url, api_key="unused", max_retries=0, timeout=120)
    with plain(open_server) as http:
        created = http.post("/v1/mcp-servers", json={"server_name": "flood", "config": {
            "mcp_server_type": "stdio", "command": commands["demo"], "args": []}}).json()
        tools = {t["name"]: t for t in http.get(f"/v1/mcp-servers/{created['id']}/tools").json()}
        run = f"/v1/mcp-servers/{created['id']}/tools/{{}}/run"
        before = _rss_mb()
        flooded = http.post(run.format(tools["flood"]["id"]),
                            json={"args": {"megabytes": 20}}).json()
        grown = _rss_mb() - before
        assert flooded["status"] == "error" and "over 1000000 bytes" in flooded["func_return"]
        assert grown < 150, f"the server grew by {grown:.0f} MB on a 20 MB result"
        added = http.post(run.format(tools["add"]["id"]), json={"args": {"a": 1, "b": 2}})
        assert added.json()["func_return"] == "3"  # restarted for the next call

        # Within the message bound, the text is cut to the return limit, as a source tool's.
        long = http.post(run.format(tools["flood"]["id"]), json={"args": {"megabytes": 0.2}})
        text = long.json()["func_return"]
        assert text.startswith("x" * 50_000) and len(text) < 50_200
        assert "truncated" in text and "200000 > 50000" in text

        agent = new_agent(client, tool_ids=[tools["flood"]["id"]])
        script.set(call("flood", megabytes=0.2), reply("long"))
        response = client.agents.messages.create(agent.id, input="flood")
        [returned] = [m for m in response.messages if m.message_type == "tool_return_message"]
        assert len(returned.tool_return) < 50_200 and "200000 > 50000" in returned.tool_return
        http.delete(f"/v1/mcp-servers/{created['id']}")

    with http_demo() as url, plain(open_server) as http:
        created = http.post("/v1/mcp-servers", json={"server_name": "flood-http", "config": {
            "mcp_server_type": "streamable_http", "server_url": url}}).json()
        tools = {t["name"]: t for t in http.get(f"/v1/mcp-servers/{created['id']}/tools").json()}
        flooded = http.post(f"/v1/mcp-servers/{created['id']}/tools/{tools['flood']['id']}/run",
                            json={"args": {"megabytes": 20}}).json()
        assert flooded["status"] == "error", flooded
        assert "response exceeded 1000000 bytes" in flooded["func_return"]
        http.delete(f"/v1/mcp-servers/{created['id']}")


def test_a_targets_reply_is_never_quoted(open_server: Server) -> None:
    replies = [(200, b'{"leak": "BODY-SECRET"}', "application/json"),
               (500, b"BODY-SECRET", "text/plain"),
               (400, b'{"jsonrpc": "2.0", "BODY-SECRET": 1}', "application/json")]
    for status, body, content_type in replies:
        with Target(status, body, content_type) as target, plain(open_server) as http:
            url = f"http://127.0.0.1:{target.port}/mcp"
            for kind in ("streamable_http", "sse"):
                tested = http.post("/v1/tools/mcp/servers/test", json={
                    "server_name": "target", "type": kind, "server_url": url})
                assert tested.status_code == 424, tested.text
                assert "BODY-SECRET" not in tested.text
        assert target.requests  # reached (the operator allows loopback), never quoted


def _alive(command: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and command.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize(("kind", "env"), [("deep", {"MCP_DEMO_DEPTH": "220"}),
                                           ("surrogate", {})])
def test_a_tool_list_that_cannot_be_read_fails_fast_and_stops_the_server(
        open_server: Server, commands: dict[str, str], kind: str, env: dict[str, str]) -> None:
    with plain(open_server) as http:
        started = time.monotonic()
        created = http.post("/v1/mcp-servers", json={"server_name": f"bad-{kind}", "config": {
            "mcp_server_type": "stdio", "command": commands[kind], "args": [], "env": env}})
        took = time.monotonic() - started
        assert created.status_code == 200, created.text
        assert took < 60, f"creating the server took {took:.0f} s"
        server_id = created.json()["id"]
        assert http.get(f"/v1/mcp-servers/{server_id}/tools").json() == []
        refreshed = http.patch(f"/v1/mcp-servers/{server_id}/refresh")
        assert refreshed.status_code == 424 and "not JSON-RPC" in refreshed.json()["detail"]
        deadline = time.monotonic() + 60
        while _alive(commands[kind]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _alive(commands[kind]) == []
        http.delete(f"/v1/mcp-servers/{server_id}")
