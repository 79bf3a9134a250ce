"""MCP servers over REST with letta-client (``client.mcp_servers``): register a server (stdio
and Streamable HTTP, written with the SDK), its tools listed into the registry, run one,
attach one to an agent and have the model call it; secrets stored and read back redacted;
unknown ids, bad configs and unreachable servers answered with clear errors.

The operator allows the demo server's command (``mcp_stdio_commands``) and MCP servers on
loopback (``mcp_private_urls``); stdio servers run in the tools' sandbox."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import letta_client
import pytest
from letta_client import Letta

from mcp_support import demo_command, http_demo
from stateloop.testing import call, reply
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Script, Server, client, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

MISSING = "/nonexistent/mcp-server"  # allowed, but not there


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> str:
    return demo_command(tmp_path_factory.mktemp("mcp-demo"))


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, demo: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("server") / "stateloop.db"
    settings = settings_for(fake, db, mcp_stdio_commands=[demo, MISSING],
                            mcp_private_urls=True)
    with Server(settings) as running:
        yield running


def stdio_config(command: str, **env: str) -> dict[str, Any]:
    return {"mcp_server_type": "stdio", "command": command, "args": [],
            "env": {"DEMO_SECRET": "s3cret", **env}}


def test_a_stdio_server_its_tools_and_a_run(client: Letta, demo: str) -> None:
    created = client.mcp_servers.create(server_name="demo-rest", config=stdio_config(demo))
    assert created.id.startswith("mcp_server-") and created.server_name == "demo-rest"
    assert created.env == {"DEMO_SECRET": "****"}  # stored, never shown
    assert created.command == demo and created.args == []
    assert [s.id for s in client.mcp_servers.list()].count(created.id) == 1
    assert client.mcp_servers.retrieve(created.id).env == {"DEMO_SECRET": "****"}

    tools = {t.name: t for t in client.mcp_servers.tools.list(created.id)}
    assert {"add", "secret", "refuse", "pixel", "weather"} <= set(tools)
    add = tools["add"]
    assert add.tool_type == "external_mcp" and add.tags == ["mcp:demo-rest"]
    assert add.metadata == {"mcp": {"server_name": "demo-rest", "server_id": created.id}}
    assert add.json_schema["parameters"]["required"] == ["a", "b"]
    assert client.mcp_servers.tools.retrieve(add.id, mcp_server_id=created.id).name == "add"

    ran = client.mcp_servers.tools.run(add.id, mcp_server_id=created.id, args={"a": 2, "b": 5})
    assert (ran.status, ran.func_return) == ("success", "7")
    secret = client.mcp_servers.tools.run(tools["secret"].id, mcp_server_id=created.id)
    assert secret.func_return == "s3cret"  # the stored env reached the server
    refused = client.mcp_servers.tools.run(tools["refuse"].id, mcp_server_id=created.id,
                                           args={"reason": "rain"})
    assert refused.status == "error" and "refused: rain" in str(refused.func_return)

    # Sent back as read, a redacted secret keeps what is stored; a new value replaces it.
    kept = client.mcp_servers.update(created.id, config={
        "mcp_server_type": "stdio", "env": {"DEMO_SECRET": "****"}}, server_name="demo-rest2")
    assert kept.server_name == "demo-rest2" and kept.env == {"DEMO_SECRET": "****"}
    assert client.mcp_servers.tools.run(
        tools["secret"].id, mcp_server_id=created.id).func_return == "s3cret"
    client.mcp_servers.update(created.id, config={
        "mcp_server_type": "stdio", "env": {"DEMO_SECRET": "changed"}})
    assert client.mcp_servers.tools.run(
        tools["secret"].id, mcp_server_id=created.id).func_return == "changed"

    summary = client.mcp_servers.refresh(created.id)
    assert summary["added"] == [] and "add" in summary["updated"] and summary["deleted"] == []

    client.mcp_servers.delete(created.id)
    with pytest.raises(letta_client.NotFoundError):
        client.mcp_servers.retrieve(created.id)
    with pytest.raises(letta_client.NotFoundError):
        client.tools.retrieve(add.id)  # its tools went with it


def test_an_agent_calls_an_attached_mcp_tool(client: Letta, script: Script, demo: str
                                             ) -> None:
    server = client.mcp_servers.create(server_name="demo-agent", config=stdio_config(demo))
    weather = next(t for t in client.mcp_servers.tools.list(server.id) if t.name == "weather")
    agent = new_agent(client)
    client.agents.tools.attach(weather.id, agent_id=agent.id)
    script.set(call("weather", city="Oslo"), reply("Mild."))
    response = client.agents.messages.create(agent.id, input="weather in Oslo?")
    [returned] = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert returned.status == "success" and '"celsius": 21' in returned.tool_return
    offered = {tool.name: tool for tool in script.requests[0].tools}
    assert offered["weather"].parameters["required"] == ["city"]
    client.mcp_servers.delete(server.id)


def test_an_http_server_with_headers_redacted(client: Letta) -> None:
    with http_demo() as url:
        created = client.mcp_servers.create(server_name="demo-http", config={
            "mcp_server_type": "streamable_http", "server_url": url,
            "auth_header": "Authorization", "auth_token": "Bearer t0ken",
            "custom_headers": {"X-Key": "k3y"}})
        assert (created.auth_header, created.auth_token) == ("Authorization", "****")
        assert created.custom_headers == {"X-Key": "****"}
        tools = {t.name: t for t in client.mcp_servers.tools.list(created.id)}
        ran = client.mcp_servers.tools.run(tools["add"].id, mcp_server_id=created.id,
                                           args={"a": 1, "b": 1})
        assert ran.func_return == "2"
        listed = client.mcp_servers.list()
        assert "t0ken" not in str(listed) and "k3y" not in str(listed)
        client.mcp_servers.delete(created.id)


def test_bad_input_and_unreachable_servers(client: Letta, demo: str) -> None:
    with pytest.raises(letta_client.NotFoundError):
        client.mcp_servers.retrieve("mcp_server-00000000-0000-0000-0000-000000000000")
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.mcp_servers.create(server_name="bad", config={
            "mcp_server_type": "streamable_http", "server_url": "ftp://example"})
    # A server that cannot start is stored (as in Letta) without tools; refreshing says why.
    missing = client.mcp_servers.create(server_name="missing", config={
        "mcp_server_type": "stdio", "command": MISSING, "args": []})
    assert client.mcp_servers.tools.list(missing.id) == []
    with pytest.raises(letta_client.APIStatusError) as failed:
        client.mcp_servers.refresh(missing.id)
    assert failed.value.status_code == 424 and "missing" in str(failed.value)
    with pytest.raises(letta_client.ConflictError):
        client.mcp_servers.create(server_name="missing", config=stdio_config(demo))
    client.mcp_servers.delete(missing.id)
