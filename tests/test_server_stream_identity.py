"""Streamed and returned messages carry the ids Letta gives them: each chunk has the id,
``otid`` and ``step_id`` of the message it becomes when stored (a client joins chunks by
otid and finds them again in the history), and otids never repeat across runs."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any

from letta_client import Letta

from stateloop.server.services.messages import otid
from stateloop.testing.scripted import call, reply
from test_server_support import Script, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

SHOWN = ("reasoning_message", "assistant_message", "tool_call_message",
         "approval_request_message", "tool_return_message")
WEATHER = {"name": "get_weather", "description": "The weather in a city now.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}


def shown(messages: Any) -> list[Any]:
    return [m for m in messages if m.message_type in SHOWN]


def stored(client: Letta, agent_id: str) -> dict[str, Any]:
    """The agent's listed messages by otid (the user's too)."""
    return {m.otid: m for m in client.agents.messages.list(agent_id, limit=100).items}


def test_otids_follow_letta_s_scheme() -> None:
    # A UUID message id keeps all but its low 7 bits, which hold the index (Letta's rule).
    letta_id = "message-123e4567-e89b-42d3-8456-426614174000"
    assert otid(letta_id, 0) == "123e4567-e89b-42d3-8456-426614174000"
    assert otid(letta_id, 3) == "123e4567-e89b-42d3-8456-426614174003"
    # Our ids end in a counter: consecutive ids must not share otids (no bits are dropped).
    ours = [f"message-0123456789abcdef-{n:08x}" for n in range(300)]
    made = {otid(i, k) for i in ours for k in range(3)}
    assert len(made) == 900
    assert all(uuid.UUID(o) for o in made)
    assert otid("message-not hex", 1) != otid("message-not hex", 0)


def test_streamed_chunks_carry_the_stored_message_s_id_otid_and_step(
        client: Letta, script: Script) -> None:
    agent = new_agent(client)
    seen: list[set[str]] = []
    for text in ("first answer", "second answer"):
        script.set(reply(text, reasoning="thinking it over"))
        chunks = shown(client.agents.messages.create(
            agent.id, input="hi", streaming=True, stream_tokens=True, include_pings=False))
        assert len(chunks) > 2  # tokens, not whole messages
        by_otid: dict[str, list[Any]] = defaultdict(list)
        for chunk in chunks:
            by_otid[chunk.otid].append(chunk)
        kinds = {o: {c.message_type for c in group} for o, group in by_otid.items()}
        assert sorted(next(iter(k)) for k in kinds.values()) == [
            "assistant_message", "reasoning_message"]
        assert all(len(k) == 1 for k in kinds.values())  # one otid, one message
        [[message_id], [step_id], [run_id]] = [
            list({getattr(c, key) for c in chunks}) for key in ("id", "step_id", "run_id")]
        [step] = client.runs.steps.list(run_id).items
        assert step_id == step.id

        history = stored(client, agent.id)
        for chunk_otid, group in by_otid.items():
            message = history[chunk_otid]
            assert (message.id, message.step_id, message.message_type) == (
                message_id, step_id, group[0].message_type)
        joined = "".join(c.content for c in by_otid[next(
            o for o, k in kinds.items() if k == {"assistant_message"})])
        assert joined == text
        seen.append(set(by_otid))
    assert not seen[0] & seen[1]  # a new run, new otids


def test_returned_and_whole_streamed_messages_match_the_history(
        client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("plain"))
    response = client.agents.messages.create(agent.id, input="hello")
    [answer] = shown(response.messages)
    [step] = client.runs.steps.list(answer.run_id).items
    assert answer.step_id == step.id
    listed = stored(client, agent.id)[answer.otid]
    assert (listed.id, listed.step_id, listed.content) == (answer.id, step.id, "plain")

    # A call awaiting the client, streamed whole: the request is the stored reply.
    script.set(call("get_weather", city="Oslo"))
    frames = shown(client.agents.messages.create(
        agent.id, input="weather?", streaming=True, include_pings=False,
        client_tools=[WEATHER]))
    [request] = frames
    assert request.message_type == "approval_request_message"
    listed = stored(client, agent.id)[request.otid]
    assert (listed.id, listed.step_id, listed.message_type) == (
        request.id, request.step_id, "approval_request_message")
    assert request.step_id is not None

    script.set(reply("sunny, then"))
    call_id = request.tool_call.tool_call_id  # type: ignore[union-attr]
    resumed = client.agents.messages.create(agent.id, messages=[{
        "type": "approval", "approvals": [{"type": "tool", "tool_call_id": call_id,
                                           "status": "success", "tool_return": "sunny"}]}])
    kinds = [m.message_type for m in shown(resumed.messages)]
    assert kinds[-1] == "assistant_message"
    history = stored(client, agent.id)
    for message in shown(resumed.messages):
        assert history[message.otid].id == message.id
        if message.message_type == "assistant_message":
            assert message.step_id == history[message.otid].step_id is not None
    otids = [m.otid for m in client.agents.messages.list(agent.id, limit=100).items]
    assert len(otids) == len(set(otids))
