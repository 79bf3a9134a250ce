"""``model_settings`` and ``response_format`` over Letta's REST API, driven by letta-client:
stored, shown, changed, and sent to the provider in its own form (the fake server records
each request body)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from typing import Any

import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.testing import reply
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import client, fake, new_agent, script, server  # noqa: F401 (fixtures)

SCHEMA = {"name": "city", "strict": True, "schema": {
    "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
    "additionalProperties": False}}


def _plain(value: Any) -> Any:
    return value.model_dump(exclude_unset=True) if hasattr(value, "model_dump") else value


def _send(client: Letta, fake: FakeOpenAI, agent_id: str, text: str) -> tuple[Any, dict[str, Any]]:
    before = len(fake.requests)
    response = client.agents.messages.create(agent_id, input=text)
    return response, fake.requests[before].body


def test_openai_settings_are_stored_shown_and_sent(client: Letta, script: Script,
                                                   fake: FakeOpenAI) -> None:
    settings = {"provider_type": "openai", "temperature": 0.25, "max_output_tokens": 500,
                "parallel_tool_calls": False, "reasoning": {"reasoning_effort": "low"}}
    agent = new_agent(client, model_settings=settings,
                      response_format={"type": "json_schema", "json_schema": SCHEMA})
    assert _plain(agent.model_settings) == settings
    assert _plain(agent.response_format) == {"type": "json_schema", "json_schema": SCHEMA}
    assert agent.llm_config.max_tokens == 500
    script.set(reply('{"name": "Paris"}'))
    response, body = _send(client, fake, agent.id, "Which city?")
    assert body["temperature"] == 0.25 and body["reasoning_effort"] == "low"
    assert body["max_tokens"] == 500
    assert body["response_format"] == {"type": "json_schema", "json_schema": SCHEMA}
    # as in Letta: the final answer is the assistant message, its content the JSON text
    answers = [m for m in response.messages if m.message_type == "assistant_message"]
    assert json.loads(answers[-1].content) == {"name": "Paris"}

    retrieved = client.agents.retrieve(agent.id)
    assert _plain(retrieved.model_settings) == settings
    config = retrieved.llm_config  # Letta's LLMConfig says them too
    assert (config.temperature, config.reasoning_effort) == (0.25, "low")
    assert config.response_format is not None


def test_modify_replaces_settings_and_keeps_the_format(client: Letta, script: Script,
                                                       fake: FakeOpenAI) -> None:
    agent = new_agent(client, response_format={"type": "json_object"},
                      model_settings={"provider_type": "openai", "temperature": 0.9})
    client.agents.update(agent.id, model_settings={"provider_type": "openai",
                                                   "temperature": 0.1})
    script.set(reply('{"a": 1}'))
    _, body = _send(client, fake, agent.id, "json please")
    assert body["temperature"] == 0.1 and body["response_format"] == {"type": "json_object"}
    client.agents.update(agent.id, response_format={"type": "text"})
    assert _plain(client.agents.retrieve(agent.id).response_format) == {"type": "text"}
    script.set(reply("plain"))
    _, body = _send(client, fake, agent.id, "text now")
    assert "response_format" not in body and body["temperature"] == 0.1


def test_claude_settings_in_anthropic_terms(client: Letta, script: Script,
                                            fake: FakeOpenAI) -> None:
    agent = new_agent(client, model="anthropic/claude-sonnet-4-5", model_settings={
        "provider_type": "anthropic", "temperature": 1.0, "max_output_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048}, "parallel_tool_calls": False})
    script.set(reply("ok"))
    _, body = _send(client, fake, agent.id, "hi")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["temperature"] == 1.0 and body["max_tokens"] == 4096
    config = client.agents.retrieve(agent.id).llm_config
    assert (config.enable_reasoner, config.max_reasoning_tokens) == (True, 2048)


@pytest.mark.parametrize(("body", "field"), [
    ({"model_settings": {"provider_type": "openai", "temperature": "hot"}},
     "'model_settings', 'temperature'"),
    ({"model_settings": {"provider_type": "openai",
                         "reasoning": {"reasoning_effort": "extreme"}}}, "reasoning"),
    ({"model_settings": {"provider_type": "openai", "thinking": {"budget_tokens": 2048}}},
     "thinking"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "json_schema"),
    ({"model": "anthropic/claude-sonnet-4-5", "response_format": {"type": "json_object"}},
     "response_format"),
    ({"model_settings": {"provider_type": "openai", "verbosity": "low"}}, "verbosity"),
])
def test_invalid_settings_are_a_422_naming_the_field(client: Letta, body: dict[str, Any],
                                                     field: str) -> None:
    with pytest.raises(letta_client.UnprocessableEntityError, match=field):
        new_agent(client, **body)
