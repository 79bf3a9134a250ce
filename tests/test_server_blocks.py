"""Renaming core memory blocks through letta-client: by the agent's label, by the block's id,
and what a live agent's model sees afterwards."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.testing import reply
from test_server_support import client, fake, new_agent, script, server  # noqa: F401 (fixtures)


def test_renaming_a_block_by_label_reaches_a_live_agents_prompt(client: Letta,
                                                                script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("Hello."), reply("Hello again."))
    client.agents.messages.create(agent.id, input="hi")  # the agent is now live
    renamed = client.agents.blocks.update("human", agent_id=agent.id, label="user",
                                          value="Name: Grace")
    assert (renamed.label, renamed.value) == ("user", "Name: Grace")
    state = client.agents.retrieve(agent.id, include=["agent.blocks"])
    assert [b.label for b in state.blocks] == ["user"]
    client.agents.messages.create(agent.id, input="and now?")
    system = script.requests[-1].messages[0].text
    assert "<user>" in system and "<human>" not in system and "Name: Grace" in system


def test_renaming_a_shared_block_by_id_renames_it_for_every_agent(client: Letta) -> None:
    shared = client.blocks.create(label="org", value="ACME")
    first, second = new_agent(client), new_agent(client)
    for agent in (first, second):
        client.agents.blocks.attach(shared.id, agent_id=agent.id)
    renamed = client.blocks.update(shared.id, label="company")
    assert renamed.label == "company" and client.blocks.retrieve(shared.id).label == "company"
    for agent in (first, second):
        assert client.agents.blocks.retrieve("company", agent_id=agent.id).value == "ACME"
        with pytest.raises(letta_client.NotFoundError):
            client.agents.blocks.retrieve("org", agent_id=agent.id)


def test_a_rename_onto_a_label_the_agent_has_is_409_and_changes_nothing(client: Letta) -> None:
    agent = new_agent(client, memory_blocks=[{"label": "human", "value": "Ada"},
                                             {"label": "persona", "value": "Kind."}])
    with pytest.raises(letta_client.ConflictError, match="persona"):
        client.agents.blocks.update("human", agent_id=agent.id, label="persona")
    with pytest.raises(letta_client.UnprocessableEntityError, match="label"):
        client.agents.blocks.update("human", agent_id=agent.id, label="")
    state = client.agents.retrieve(agent.id, include=["agent.blocks"])
    assert [(b.label, b.value) for b in state.blocks] == [
        ("human", "Ada"), ("persona", "Kind.")]
