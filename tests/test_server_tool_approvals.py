"""Per-agent approval of tool calls over HTTP with letta-client: a tool's
``default_requires_approval`` becomes a ``requires_approval`` rule on the agent it is given
to, and ``PATCH .../tools/approval/{name}`` turns that rule off or on for that agent only."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from letta_client import Letta

from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from test_server_support import (  # noqa: F401 (fixtures)
    Script,
    Server,
    client,
    fake,
    new_agent,
    script,
    server,
    settings_for,
)

CAREFUL = '''
def careful(text: str) -> str:
    """Do something a human should allow.

    Args:
        text: What to do.
    """
    return "done: " + text
'''


@pytest.fixture(scope="module")
def careful_tool(server: Server) -> Any:
    client = Letta(base_url=server.url, api_key="x")
    return client.tools.create(source_code=CAREFUL, default_requires_approval=True)


def approval_rules(state: Any) -> list[str]:
    return [r.tool_name for r in state.tool_rules or [] if r.type == "requires_approval"]


def stop_reason(client: Letta, script: Script, agent_id: str) -> str:
    script.set(call("careful", text="it"), reply("ok"))
    response = client.agents.messages.create(agent_id, input="do it")
    return response.stop_reason.stop_reason  # type: ignore[no-any-return]


def test_default_approval_is_the_agents_rule_and_can_be_turned_off(
        client: Letta, script: Script, careful_tool: Any) -> None:
    assert careful_tool.default_requires_approval is True
    agent = new_agent(client, tools=["careful"])
    assert approval_rules(agent) == ["careful"]
    assert stop_reason(client, script, agent.id) == "requires_approval"
    # Answer the pending call, then turn approval off for this agent only.
    state = client.agents.retrieve(agent.id, include=["agent.pending_approval"])
    pending = state.pending_approval
    client.agents.messages.create(agent.id, messages=[{
        "type": "approval", "approvals": [{"type": "approval", "approve": False,
                                           "tool_call_id": pending.tool_call.tool_call_id}]}])
    state = client.agents.tools.update_approval("careful", agent_id=agent.id,
                                                body_requires_approval=False)
    assert approval_rules(state) == []
    assert approval_rules(client.agents.retrieve(agent.id)) == []
    assert stop_reason(client, script, agent.id) == "end_turn"
    assert script.requests[-1].messages[-1].text == "done: it"
    # Another agent given the same tool still asks.
    other = new_agent(client, tools=["careful"])
    assert stop_reason(client, script, other.id) == "requires_approval"
    # And ``true`` turns it back on.
    state = client.agents.tools.update_approval("careful", agent_id=agent.id,
                                                body_requires_approval=True)
    assert approval_rules(state) == ["careful"]
    assert stop_reason(client, script, agent.id) == "requires_approval"


def test_attaching_copies_the_default_and_a_restart_keeps_the_choice(
        fake: FakeOpenAI, script: Script, careful_tool: Any, tmp_path: Path) -> None:
    settings = settings_for(fake, tmp_path / "approvals.db")
    with Server(settings) as first:
        client = Letta(base_url=first.url, api_key="x", max_retries=0, timeout=30)
        tool = client.tools.create(source_code=CAREFUL, default_requires_approval=True)
        agent = new_agent(client)
        state = client.agents.tools.attach(tool.id, agent_id=agent.id)
        assert approval_rules(state) == ["careful"]
        client.agents.tools.update_approval("careful", agent_id=agent.id,
                                            body_requires_approval=False)
    with Server(settings) as second:
        client = Letta(base_url=second.url, api_key="x", max_retries=0, timeout=30)
        assert approval_rules(client.agents.retrieve(agent.id)) == []
        assert stop_reason(client, script, agent.id) == "end_turn"
