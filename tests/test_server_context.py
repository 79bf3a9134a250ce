"""An agent's context as a whole (core memory, recompiling its system prompt, resetting its
messages) and one message by id, through letta-client where it has the method and plain
HTTP otherwise; every answer is checked against Letta's document."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from letta_spec import assert_letta_shape
from stateloop.testing.scripted import reply
from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

MISSING_AGENT = "agent-00000000-0000-4000-8000-000000000000"


def test_core_memory_lists_the_agents_blocks_in_order(server: Server, client: Letta) -> None:
    agent = new_agent(client)
    shared = client.blocks.create(label="team", value="Shared notes")
    client.agents.blocks.attach(shared.id, agent_id=agent.id)
    response = httpx.get(f"{server.url}/v1/agents/{agent.id}/core-memory")
    assert response.status_code == 200, response.text
    memory = response.json()
    assert [(b["label"], b["value"]) for b in memory["blocks"]] == [
        ("human", "Name: Ada"), ("team", "Shared notes")]
    assert_letta_shape("/v1/agents/{agent_id}/core-memory", "get", memory)
    assert httpx.get(f"{server.url}/v1/agents/{MISSING_AGENT}/core-memory").status_code == 404


def test_recompile_returns_the_prompt_memory_renders_now(server: Server, client: Letta,
                                                         script: Script) -> None:
    agent = new_agent(client, system="You are terse.")
    client.agents.blocks.update("human", agent_id=agent.id, value="Name: Grace")
    # Letta answers with a JSON string, which letta-client hands over still encoded.
    dry = json.loads(client.agents.recompile(agent.id, dry_run=True))
    assert "You are terse." in dry and "Name: Grace" in dry and "Name: Ada" not in dry
    before = client.agents.retrieve(agent.id).message_ids
    prompt = json.loads(client.agents.recompile(agent.id))
    assert "Name: Grace" in prompt
    after = client.agents.retrieve(agent.id).message_ids
    # As Letta's rebuild_system_prompt: the system message keeps its id, with the new text.
    assert after and after == before
    assert "Name: Grace" in client.messages.retrieve(after[0])[0].content  # type: ignore[union-attr]
    script.set(reply("Hello Grace."))
    client.agents.messages.create(agent.id, input="Who am I?")
    assert "Name: Grace" in script.requests[-1].messages[0].text
    # One system message in the history, after the edit and a run as before them.
    client.agents.blocks.update("human", agent_id=agent.id, value="Name: Grace Hopper")
    script.set(reply("Hello again."))
    client.agents.messages.create(agent.id, input="And now?")
    assert "Name: Grace Hopper" in script.requests[-1].messages[0].text
    history = list(client.agents.messages.list(agent.id, limit=100))
    systems = [m for m in history if m.message_type == "system_message"]
    assert [m.id for m in systems] == [after[0]] and history[0].id == after[0]
    assert "Name: Grace Hopper" in systems[0].content
    old = httpx.post(f"{server.url}/v1/agents/{agent.id}/system-prompt/recompile",
                     params={"dry_run": "true"})
    assert old.status_code == 200 and "Name: Grace" in old.json()
    assert_letta_shape("/v1/agents/{agent_id}/recompile", "post", old.json())
    with pytest.raises(letta_client.NotFoundError):
        client.agents.recompile(MISSING_AGENT)


def test_reset_messages_clears_the_context_and_keeps_recall(
        server: Server, client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("Hello Ada."), reply("Fresh start."))
    client.agents.messages.create(agent.id, input="Hi, I am Ada.")
    state = client.agents.messages.reset(agent.id)
    assert state is not None and len(state.message_ids or []) == 1
    history = [m.message_type for m in client.agents.messages.list(agent.id, order="asc")]
    # Still in recall, followed by the system prompt the context now starts with.
    assert history[-3:] == ["user_message", "assistant_message", "system_message"]
    client.agents.messages.create(agent.id, input="Who am I?")
    assert [m.role for m in script.requests[-1].messages] == ["system", "user"]
    body = httpx.patch(f"{server.url}/v1/agents/{agent.id}/reset-messages", json={}).json()
    assert_letta_shape("/v1/agents/{agent_id}/reset-messages", "patch", body)
    refused = httpx.patch(f"{server.url}/v1/agents/{agent.id}/reset-messages",
                          json={"add_default_initial_messages": True})
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "add_default_initial_messages"]
    with pytest.raises(letta_client.NotFoundError):
        client.agents.messages.reset(MISSING_AGENT)


def test_one_message_by_id(server: Server, client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("Tea, then.", reasoning="She likes tea."))
    client.agents.messages.create(agent.id, input="Tea or coffee?")
    listed = client.agents.messages.list(agent.id, order="asc").items
    answer = next(m for m in listed if m.message_type == "assistant_message")
    found = client.messages.retrieve(answer.id)
    assert [(m.id, m.message_type) for m in found] == [
        (answer.id, "reasoning_message"), (answer.id, "assistant_message")]
    assert found[-1].content == "Tea, then."  # type: ignore[union-attr]
    response = httpx.get(f"{server.url}/v1/messages/{answer.id}")
    assert_letta_shape("/v1/messages/{message_id}", "get", response.json())
    missing = httpx.get(f"{server.url}/v1/messages/message-nope")
    assert missing.status_code == 404 and "message-nope" in missing.json()["detail"]
