"""Every value of Letta's ``AgentType`` is accepted on create, runs as its preset and keeps its
own name; an unknown type is a 422 listing the known ones."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json

import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from shared_fixtures import LETTA_OPENAPI
from stateloop.agent_types import AGENT_TYPES
from stateloop.testing import call
from test_server_support import client, fake, new_agent, script, server  # noqa: F401 (fixtures)

SPEC_TYPES = json.loads(LETTA_OPENAPI.read_text())["components"]["schemas"]["AgentType"]["enum"]

# The tools each type attaches by default to a stored agent with a writable block.
EXPECTED_TOOLS = {
    "letta_v1_agent": {"memory_insert", "memory_replace", "conversation_search"},
    # Letta 0.16.8's include_base_tools sets (agent_manager.py, constants.py)
    "memgpt_agent": {"send_message", "core_memory_append", "core_memory_replace", "memory",
                     "memory_apply_patch", "conversation_search"},
    "memgpt_v2_agent": {"send_message", "memory_insert", "memory_replace",
                        "conversation_search"},
    "split_thread_agent": {"send_message", "core_memory_append", "core_memory_replace",
                           "memory", "memory_apply_patch", "conversation_search"},
    "react_agent": set(),
    "workflow_agent": set(),
    "sleeptime_agent": {"memory_replace", "memory_insert", "memory_rethink",
                        "memory_finish_edits"},
    "voice_sleeptime_agent": {"store_memories", "rethink_user_memory",
                              "finish_rethinking_memory"},
    "voice_convo_agent": {"send_message", "search_memory"},
}


def test_every_spec_type_has_a_preset() -> None:
    assert set(SPEC_TYPES) == set(AGENT_TYPES) == set(EXPECTED_TOOLS)


@pytest.mark.parametrize("kind", SPEC_TYPES)
def test_each_type_is_created_with_its_name_and_tools(client: Letta, kind: str) -> None:
    agent = new_agent(client, agent_type=kind, include_base_tools=True)
    assert agent.agent_type == kind
    assert {t.name for t in agent.tools} == EXPECTED_TOOLS[kind]
    again = client.agents.retrieve(agent.id)
    assert again.agent_type == kind and again.memory.agent_type == kind


def test_memgpt_v2_agent_continues_on_heartbeats_and_answers_with_send_message(
        client: Letta, script: Script) -> None:
    agent = new_agent(client, agent_type="memgpt_v2_agent", include_base_tools=True)
    script.set(call("memory_insert", label="human", new_string="Likes tea.",
                    request_heartbeat=True),
               call("send_message", message="Noted: you like tea."))
    response = client.agents.messages.create(agent.id, input="I like tea")
    assert response.stop_reason is not None and response.stop_reason.stop_reason == "end_turn"
    said = [m for m in response.messages if m.message_type == "assistant_message"]
    assert [m.content for m in said] == ["Noted: you like tea."]
    assert "Likes tea." in client.agents.blocks.retrieve("human", agent_id=agent.id).value
    assert len(script.requests) == 2


def test_an_unknown_type_is_422_listing_the_known_ones(client: Letta) -> None:
    with pytest.raises(letta_client.UnprocessableEntityError) as info:
        new_agent(client, agent_type="wizard_agent")
    body = str(info.value.body)
    assert "agent_type" in body and "wizard_agent" in body
    assert all(kind in body for kind in SPEC_TYPES)
