"""Parallel tool calls over HTTP: one step's calls are one Letta message, as Letta shows them
(``tool_calls`` lists them all), and so are their results (``tool_returns``), in responses,
streams and the message list."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from typing import Any

import httpx
from letta_client import Letta

from letta_spec import assert_letta_shape
from stateloop.testing.scripted import call, calls, reply
from test_server_support import Script, Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

ECHO = '''
def echo(text: str) -> str:
    """Say the text back.

    Args:
        text: What to say.
    """
    return text
'''

THREE = calls(call("echo", text="a"), call("echo", text="b"), call("echo", text="c"))


def kinds(messages: list[Any]) -> list[str]:
    return [m.message_type for m in messages]


def arguments(message: Any) -> list[str]:
    return [c.arguments for c in message.tool_calls]


def test_three_calls_in_one_step_are_one_tool_call_message(client: Letta, script: Script,
                                                           server: Server) -> None:
    client.tools.upsert(source_code=ECHO)
    agent = new_agent(client, tools=["echo"])
    expected = ["tool_call_message", "tool_return_message", "assistant_message"]

    script.set(THREE, reply("done"))
    raw = httpx.post(f"{server.url}/v1/agents/{agent.id}/messages", timeout=30,
                     json={"messages": [{"role": "user", "content": "go"}]}).json()
    assert_letta_shape("/v1/agents/{agent_id}/messages", "post", raw)
    plain = raw["messages"]
    assert [m["message_type"] for m in plain] == expected
    ids = [t["tool_call_id"] for t in plain[0]["tool_calls"]]
    returns = plain[1]["tool_returns"]  # was three tool_return_messages
    assert [(r["tool_call_id"], r["tool_return"], r["status"]) for r in returns] == [
        (ids[0], "a", "success"), (ids[1], "b", "success"), (ids[2], "c", "success")]
    assert (plain[1]["tool_call_id"], plain[1]["tool_return"]) == (ids[0], "a")

    script.set(THREE, reply("done"))
    streamed = [f for f in client.agents.messages.create(agent.id, input="go", streaming=True,
                                                         include_pings=False)
                if f.message_type not in ("stop_reason", "usage_statistics")]
    assert kinds(streamed) == expected and len(arguments(streamed[0])) == 3
    assert [r.tool_return for r in streamed[1].tool_returns] == [  # type: ignore[union-attr]
        "a", "b", "c"]

    history = client.agents.messages.list(agent.id, limit=100, order="asc").items
    listed = [m for m in history if m.message_type == "tool_call_message"]
    assert [len(arguments(m)) for m in listed] == [3, 3]
    assert listed[0].id == plain[0]["id"]
    results = [m for m in history if m.message_type == "tool_return_message"]
    assert [len(m.tool_returns) for m in results] == [3, 3]  # type: ignore[union-attr]
    assert results[0].id == plain[1]["id"]
    assert_letta_shape("/v1/agents/{agent_id}/messages", "get", httpx.get(
        f"{server.url}/v1/agents/{agent.id}/messages", params={"limit": 100}).json())


def test_three_calls_awaiting_approval_are_one_approval_request(client: Letta, script: Script,
                                                                server: Server) -> None:
    client.tools.upsert(source_code=ECHO)
    agent = new_agent(client, tools=["echo"])
    client.agents.tools.update_approval("echo", agent_id=agent.id, body_requires_approval=True)
    script.set(THREE)
    paused = client.agents.messages.create(agent.id, input="go")
    assert paused.stop_reason.stop_reason == "requires_approval"
    assert kinds(paused.messages) == ["approval_request_message"]
    requested = [t.tool_call_id for t in paused.messages[0].tool_calls]  # type: ignore
    assert len(requested) == 3
    pending = client.agents.retrieve(agent.id, include=["agent.pending_approval"]).pending_approval
    assert pending is not None
    assert [t.tool_call_id for t in pending.tool_calls] == requested  # type: ignore[union-attr]
    listed = client.agents.messages.list(agent.id, limit=100, order="asc").items
    assert kinds(listed)[-1] == "approval_request_message"
    assert "tool_call_message" not in kinds(listed)
    assert [t.tool_call_id for t in listed[-1].tool_calls] == requested  # type: ignore

    script.set(reply("all said"))
    done = client.agents.messages.create(agent.id, messages=[{
        "type": "approval", "approvals": [{"type": "approval", "tool_call_id": i,
                                           "approve": True} for i in requested]}])
    assert kinds(done.messages) == ["tool_return_message", "assistant_message"]
    assert len(done.messages[0].tool_returns) == 3  # type: ignore[union-attr,arg-type]
    listed = client.agents.messages.list(agent.id, limit=100, order="asc").items
    [shown] = [m for m in listed if m.message_type == "tool_call_message"]
    assert len(arguments(shown)) == 3
    assert kinds(listed)[-3:] == ["approval_response_message", "tool_return_message",
                                  "assistant_message"]
    assert [a.tool_call_id for a in listed[-3].approvals] == requested  # type: ignore

    # Streamed, the approval request is one message as well.
    script.set(THREE)
    frames = list(client.agents.messages.create(agent.id, input="again", streaming=True,
                                                include_pings=False))
    [request] = [f for f in frames if f.message_type == "approval_request_message"]
    assert len(arguments(request)) == 3
