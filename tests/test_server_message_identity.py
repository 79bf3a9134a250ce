"""What a letta-client app keys on in messages: its own ``otid``s, each message's step, the
``send_message`` call shown as is (``use_assistant_message=false``), and a run's messages
filtered as its request asked (``include_return_message_types``)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import time
from typing import Any

from letta_client import Letta

from stateloop.testing.scripted import call, reply
from test_server_support import Script, Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)


def kinds(messages: list[Any]) -> list[str]:
    return [m.message_type for m in messages
            if m.message_type not in ("stop_reason", "usage_statistics", "ping")]


def finished(client: Letta, run_id: str) -> Any:
    for _ in range(200):
        run = client.runs.retrieve(run_id)
        if run.status not in ("created", "running"):
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


def test_a_client_otid_is_kept_and_returned(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("hello"))
    client.agents.messages.create(agent.id, messages=[
        {"role": "user", "content": "hi", "otid": "my-own-otid-1"}])
    listed = client.agents.messages.list(agent.id, limit=2).items
    assert kinds(listed) == ["user_message", "assistant_message"]
    assert listed[0].otid == "my-own-otid-1"
    assert listed[1].otid and listed[1].otid != "my-own-otid-1"


def test_use_assistant_message_false_shows_the_send_message_call(
        client: Letta, script: Script, server: Server) -> None:
    agent = new_agent(client, agent_type="memgpt_agent", tools=["send_message"])
    script.set(call("send_message", message="hi there"))
    shown = client.agents.messages.create(agent.id, input="hello").messages
    assert kinds(shown) == ["assistant_message"]
    assert shown[0].content == "hi there"  # type: ignore[union-attr]

    script.set(call("send_message", message="as a call"))
    plain = client.agents.messages.create(agent.id, input="again",
                                          use_assistant_message=False).messages
    assert kinds(plain) == ["tool_call_message", "tool_return_message"]
    assert plain[0].tool_call.name == "send_message"  # type: ignore[union-attr]
    assert "as a call" in plain[0].tool_call.arguments  # type: ignore[union-attr]

    for tokens in (False, True):
        script.set(call("send_message", message="streamed call"))
        frames = list(client.agents.messages.create(
            agent.id, input="stream", streaming=True, stream_tokens=tokens,
            include_pings=False, use_assistant_message=False))
        assert "assistant_message" not in kinds(frames)
        assert {"tool_call_message", "tool_return_message"} <= set(kinds(frames))

    listed = client.agents.messages.list(agent.id, limit=100, use_assistant_message=False)
    calls = [m for m in listed if m.message_type == "tool_call_message"]
    assert [c.tool_call.name for c in calls] == ["send_message"] * 4  # type: ignore
    assert "assistant_message" not in kinds(list(listed))
    assert "assistant_message" in kinds(list(client.agents.messages.list(agent.id)))


def test_an_async_run_s_messages_are_filtered_as_its_request_asked(
        client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("only this"))
    run = client.agents.messages.create_async(
        agent.id, input="hi", include_return_message_types=["assistant_message"])
    done = finished(client, run.id)
    assert done.request_config is not None
    assert done.request_config.include_return_message_types == ["assistant_message"]
    assert "request_config" not in (done.metadata or {})
    messages = client.runs.messages.list(run.id).items
    assert kinds(messages) == ["assistant_message"]

    script.set(reply("everything"))
    plain = client.agents.messages.create_async(agent.id, input="all of it")
    finished(client, plain.id)
    assert kinds(client.runs.messages.list(plain.id).items) == [
        "user_message", "assistant_message"]
    assert client.runs.retrieve(plain.id).request_config.use_assistant_message  # type: ignore


def test_listed_messages_name_their_run_and_step(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("one"))
    response = client.agents.messages.create(agent.id, input="hi")
    run_id = response.usage.run_ids[0]  # type: ignore[index]
    [step] = client.runs.steps.list(run_id).items
    listed = client.agents.messages.list(agent.id, limit=1).items
    assert (listed[0].run_id, listed[0].step_id) == (run_id, step.id)
    [answer] = [m for m in client.runs.messages.list(run_id).items
                if m.message_type == "assistant_message"]
    assert answer.step_id == step.id
