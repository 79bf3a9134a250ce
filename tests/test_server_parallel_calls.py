"""Parallel tool calls over HTTP: one step's calls are one Letta message, as Letta shows them
(``tool_calls`` lists them all), in responses, streams and the message list."""

from __future__ import annotations

from typing import Any

from letta_client import Letta

from stateloop.testing.scripted import call, calls, reply
from test_server_support import Script, Server, new_agent

pytest_plugins = ["test_server_support"]  # its fixtures: fake, server, client, script

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
    expected = ["tool_call_message"] + ["tool_return_message"] * 3 + ["assistant_message"]

    script.set(THREE, reply("done"))
    plain = client.agents.messages.create(agent.id, input="go").messages
    assert kinds(plain) == expected
    [a, b, c] = arguments(plain[0])
    assert (a, b, c) == ('{"text": "a"}', '{"text": "b"}', '{"text": "c"}')
    assert plain[0].tool_call.arguments == a  # type: ignore[union-attr]
    assert [m.tool_call_id for m in plain[1:4]] == [  # type: ignore[union-attr]
        t.tool_call_id for t in plain[0].tool_calls]  # type: ignore[union-attr]

    script.set(THREE, reply("done"))
    streamed = [f for f in client.agents.messages.create(agent.id, input="go", streaming=True,
                                                         include_pings=False)
                if f.message_type not in ("stop_reason", "usage_statistics")]
    assert kinds(streamed) == expected and len(arguments(streamed[0])) == 3

    history = client.agents.messages.list(agent.id, limit=100, order="asc").items
    listed = [m for m in history if m.message_type == "tool_call_message"]
    assert [len(arguments(m)) for m in listed] == [3, 3]
    assert listed[0].id == plain[0].id


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
    pending = client.agents.retrieve(agent.id).pending_approval
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
    assert kinds(done.messages) == ["tool_return_message"] * 3 + ["assistant_message"]
    listed = client.agents.messages.list(agent.id, limit=100, order="asc").items
    [shown] = [m for m in listed if m.message_type == "tool_call_message"]
    assert len(arguments(shown)) == 3

    # Streamed, the approval request is one message as well.
    script.set(THREE)
    frames = list(client.agents.messages.create(agent.id, input="again", streaming=True,
                                                include_pings=False))
    [request] = [f for f in frames if f.message_type == "approval_request_message"]
    assert len(arguments(request)) == 3
