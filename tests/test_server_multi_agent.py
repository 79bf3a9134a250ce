"""The multi-agent tools over letta-client: attached with ``include_multi_agent_tools``, listed
as built-ins, and run by the server's agents against each other through the fake provider."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json

from letta_client import Letta

from fake_script import Script
from stateloop.llm.base import ModelRequest
from stateloop.testing import call, reply
from test_server_support import client, fake, new_agent, script, server  # noqa: F401 (fixtures)

MULTI = {"send_message_to_agent_and_wait_for_reply", "send_message_to_agent_async",
         "send_message_to_agents_matching_tags"}


# letta-client 1.x has no argument for it; the server reads it from the body as Letta does.
WITH_TOOLS = {"include_multi_agent_tools": True}


def texts(client: Letta, agent_id: str) -> list[str]:
    found = []
    for message in client.agents.messages.list(agent_id, limit=100):
        content = getattr(message, "content", None)
        if isinstance(content, str):
            found.append(content)
        elif isinstance(content, list):
            found += [part.text for part in content if hasattr(part, "text")]
        elif getattr(message, "tool_return", None):
            found.append(str(message.tool_return))
    return found


def test_the_tools_are_attached_on_request_and_listed_as_builtins(client: Letta) -> None:
    plain = new_agent(client)
    chatty = new_agent(client, extra_body=WITH_TOOLS)
    assert not MULTI & {t.name for t in plain.tools}
    assert {t.name for t in chatty.tools} >= MULTI
    listed = {t.name: t for t in client.tools.list(limit=100)}
    for name in MULTI:
        assert listed[name].tool_type == "letta_multi_agent_core"
        assert listed[name].json_schema["parameters"]["required"]


def test_ping_pong_a_fact_between_two_served_agents(client: Letta, script: Script) -> None:
    keeper = new_agent(client, name="keeper")
    asker = new_agent(client, name="asker", extra_body=WITH_TOOLS)
    script.set(call("send_message_to_agent_and_wait_for_reply",
                    message="What is the launch code?", other_agent_id=keeper.id),
               reply("The launch code is 4217."),  # the keeper's run
               reply("Keeper says 4217."))

    response = client.agents.messages.create(
        asker.id, messages=[{"role": "user", "content": "Find the launch code."}])

    returned = [m.tool_return for m in response.messages if m.message_type == "tool_return_message"]
    assert json.loads(returned[0]) == {"agent_id": keeper.id,
                                       "response": ["The launch code is 4217."]}
    assert response.messages[-1].content == "Keeper says 4217."
    # The asker's second request carried the keeper's reply.
    assert "The launch code is 4217." in script.requests[2].messages[-1].text
    received = texts(client, keeper.id)
    assert any(t.startswith(f"[Incoming message from agent with ID '{asker.id}'")
               and t.endswith("What is the launch code?") for t in received)
    assert "The launch code is 4217." in received
    runs = client.runs.list(agent_ids=[keeper.id])
    assert [run.stop_reason for run in runs] == ["end_turn"]


def test_tags_broadcast_reaches_exactly_the_matching_served_agents(client: Letta,
                                                                    script: Script) -> None:
    def introduce(request: ModelRequest):
        name = request.messages[0].text.split()[0]  # each agent's system prompt opens with it
        return reply(f"{name} here")

    sender = new_agent(client, extra_body=WITH_TOOLS, tags=["fleet", "red"],
                       system="sender")
    agents = {name: new_agent(client, tags=tags, system=name)
              for name, tags in {"red": ["fleet", "red"], "blue": ["fleet", "blue"],
                                 "plain": ["fleet"], "outsider": ["red", "blue"]}.items()}
    script.set(call("send_message_to_agents_matching_tags", message="Status?",
                    match_all=["fleet"], match_some=["red", "blue"]),
               introduce, introduce, reply("done"))

    response = client.agents.messages.create(
        sender.id, messages=[{"role": "user", "content": "Ask the fleet."}])

    returned = [m.tool_return for m in response.messages if m.message_type == "tool_return_message"]
    replies = {entry["agent_id"]: entry["response"] for entry in json.loads(returned[0])}
    assert replies == {agents["red"].id: ["red here"], agents["blue"].id: ["blue here"]}
    for name in ("plain", "outsider"):
        assert not any("Status?" in t for t in texts(client, agents[name].id))


def test_a_cycle_between_served_agents_ends_with_an_error(client: Letta, script: Script) -> None:
    a = new_agent(client, extra_body=WITH_TOOLS)
    b = new_agent(client, extra_body=WITH_TOOLS)
    wait = "send_message_to_agent_and_wait_for_reply"
    script.set(call(wait, message="ping", other_agent_id=b.id),
               call(wait, message="pong", other_agent_id=a.id),  # B asks A back: refused
               reply("A is busy waiting on me."),
               reply("B could not ask me back."))

    response = client.agents.messages.create(
        a.id, messages=[{"role": "user", "content": "start"}])

    assert response.messages[-1].content == "B could not ask me back."
    refusal = script.requests[2].messages[-1].text  # what B's model was told
    assert refusal.startswith("Error executing function send_message_to_agent_and_wait_for_reply")
    assert f"{b.id} -> {a.id} -> {b.id}" in refusal


def test_async_send_returns_at_once_and_the_served_receiver_runs(client: Letta,
                                                                 script: Script) -> None:
    receiver = new_agent(client)
    sender = new_agent(client, extra_body=WITH_TOOLS)

    def answer(request: ModelRequest):
        last = request.messages[-1]
        if last.role == "tool":
            return reply("sent")
        if "one-way notification" in last.text:
            return reply("noted")
        if last.text == "anything else?":
            return reply("no")
        return call("send_message_to_agent_async", message="FYI: the build is green.",
                    other_agent_id=receiver.id)

    script.set(*[answer] * 4)
    response = client.agents.messages.create(
        sender.id, messages=[{"role": "user", "content": "Tell the receiver."}])
    returned = [m.tool_return for m in response.messages if m.message_type == "tool_return_message"]
    assert returned == ["Successfully sent message"]
    # A message to the receiver queues behind the run the sender started.
    client.agents.messages.create(receiver.id,
                                  messages=[{"role": "user", "content": "anything else?"}])
    received = texts(client, receiver.id)
    assert received.index("noted") < received.index("anything else?")
    assert any("one-way notification" in t and sender.id in t for t in received)
