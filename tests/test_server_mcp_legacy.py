"""Letta's older MCP routes, ``/v1/tools/mcp/servers`` (by server name; letta-client 1.12 no
longer wraps them: plain HTTP): add, list, test, connect, a server's live tools, execute,
add one tool to the registry and attach it, resync, update and delete; secrets redacted.
The operator allows the demo server's command (``mcp_stdio_commands``)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from letta_client import Letta

from mcp_support import demo_command
from stateloop.testing import call, reply
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Script, Server, client, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

MISSING = "/nonexistent/x"  # allowed, but not there


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> str:
    return demo_command(tmp_path_factory.mktemp("mcp-demo"))


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, demo: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("server") / "stateloop.db"
    with Server(settings_for(fake, db, mcp_stdio_commands=[demo, MISSING])) as running:
        yield running


@pytest.fixture
def http(server: Server) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=60)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def config(name: str, command: str, **env: str) -> dict[str, Any]:
    return {"server_name": name, "type": "stdio", "command": command, "args": [],
            "env": {"DEMO_SECRET": "s3cret", **env}}


def test_add_list_tools_execute_update_delete(http: httpx.Client, demo: str) -> None:
    added = ok(http.put("/v1/tools/mcp/servers", json=config("legacy", demo)))
    [mine] = [c for c in added if c["server_name"] == "legacy"]
    assert mine == {"server_name": "legacy", "type": "stdio", "command": demo,
                    "args": [], "env": {"DEMO_SECRET": "****"}}
    assert ok(http.get("/v1/tools/mcp/servers"))["legacy"] == mine

    tools = ok(http.get("/v1/tools/mcp/servers/legacy/tools"))
    by_name = {t["name"]: t for t in tools}
    assert by_name["add"]["inputSchema"]["required"] == ["a", "b"]
    assert by_name["add"]["description"] == "Add two integers."

    executed = ok(http.post("/v1/tools/mcp/servers/legacy/tools/secret/execute",
                            json={"args": {}}))
    assert executed == {"result": "s3cret", "success": True}
    failed = ok(http.post("/v1/tools/mcp/servers/legacy/tools/refuse/execute",
                          json={"args": {"reason": "no"}}))
    assert failed["success"] is False and "refused: no" in failed["result"]

    updated = ok(http.patch("/v1/tools/mcp/servers/legacy", json={
        "server_name": "legacy2", "stdio_config": config("legacy", demo, DEMO_SECRET="new")}))
    assert updated["server_name"] == "legacy2" and updated["env"] == {"DEMO_SECRET": "****"}
    assert ok(http.post("/v1/tools/mcp/servers/legacy2/tools/secret/execute",
                        json={"args": {}}))["result"] == "new"
    assert http.get("/v1/tools/mcp/servers/legacy/tools").status_code == 404

    left = ok(http.delete("/v1/tools/mcp/servers/legacy2"))
    assert "legacy2" not in [c["server_name"] for c in left]
    assert http.delete("/v1/tools/mcp/servers/legacy2").status_code == 404


def test_add_one_tool_attach_it_and_resync(http: httpx.Client, client: Letta,
                                           script: Script, demo: str) -> None:
    ok(http.put("/v1/tools/mcp/servers", json=config("one", demo)))
    tool = ok(http.post("/v1/tools/mcp/servers/one/add"))
    assert tool["tool_type"] == "external_mcp" and tool["metadata_"]["mcp"]["server_name"] == "one"
    assert http.post("/v1/tools/mcp/servers/one/nope").status_code == 404

    agent = new_agent(client, tool_ids=[tool["id"]])
    script.set(call("add", a=20, b=22), reply("42"))
    response = client.agents.messages.create(agent.id, input="add")
    [returned] = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert (returned.status, returned.tool_return) == ("success", "42")

    summary = ok(http.post("/v1/tools/mcp/servers/one/resync"))
    # Adding the server registered its tools already: a resync finds them all again.
    assert "add" in summary["updated"] and summary["added"] == summary["deleted"] == []
    assert http.post("/v1/tools/mcp/servers/one/resync",
                     params={"agent_id": "agent-00000000-0000-0000-0000-000000000000"}
                     ).status_code == 404
    ok(http.delete("/v1/tools/mcp/servers/one"))


def test_test_and_connect_without_storing(http: httpx.Client, demo: str) -> None:
    tested = ok(http.post("/v1/tools/mcp/servers/test", json=config("probe", demo)))
    assert tested["status"] == "success" and "add" in [t["name"] for t in tested["tools"]]
    assert "probe" not in ok(http.get("/v1/tools/mcp/servers"))

    with http.stream("POST", "/v1/tools/mcp/servers/connect",
                     json=config("probe", demo)) as streamed:
        events = [json.loads(line[len("data: "):]) for line in streamed.iter_lines()
                  if line.startswith("data: ")]
    assert [e["event"] for e in events] == ["connection_attempt", "success"]
    assert "add" in [t["name"] for t in events[1]["tools"]]

    bad = {"server_name": "gone", "type": "stdio", "command": MISSING, "args": []}
    failed = http.post("/v1/tools/mcp/servers/test", json=bad)
    assert failed.status_code == 424 and "gone" in failed.json()["detail"]
    with http.stream("POST", "/v1/tools/mcp/servers/connect", json=bad) as streamed:
        events = [json.loads(line[len("data: "):]) for line in streamed.iter_lines()
                  if line.startswith("data: ")]
    assert [e["event"] for e in events] == ["connection_attempt", "error"]
