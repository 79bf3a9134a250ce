"""An agent's model settings as each provider's request body says them (recorded by the fake
server): temperature, output tokens, reasoning, parallel calls, response format."""

from __future__ import annotations

from typing import Any

import pytest

from stateloop import Agent, tool
from stateloop.llm.base import ModelSettings
from stateloop.testing import reply
from stateloop.testing.fake_openai import FakeOpenAI

JSON_SCHEMA = {"type": "json_schema", "json_schema": {
    "name": "answer", "strict": True,
    "schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
               "additionalProperties": False}}}


@tool
def noop() -> str:
    """Do nothing."""
    return ""


async def _body(model: str, settings: ModelSettings, **options: Any) -> dict[str, Any]:
    with FakeOpenAI([reply('{"a": "b"}')]) as fake:
        agent = Agent(model, tools=[noop], include_base_tools=False, base_url=fake.base_url,
                      api_key="k", model_settings=settings, **options)
        result = await agent.run("hi")
    assert result.stop_reason == "end_turn", result.error
    return fake.requests[0].body


async def test_openai_body_carries_every_setting() -> None:
    body = await _body("openai/gpt-5-mini", ModelSettings(
        temperature=0.2, reasoning_effort="low", response_format=JSON_SCHEMA),
        max_tokens=321, parallel_tool_calls=False)
    head = {k: v for k, v in body.items() if k not in ("messages", "tools")}
    assert head == {"model": "gpt-5-mini", "stream": True,
                    "stream_options": {"include_usage": True}, "parallel_tool_calls": False,
                    "max_tokens": 321, "temperature": 0.2, "reasoning_effort": "low",
                    "response_format": JSON_SCHEMA}


async def test_openai_json_object_and_defaults_left_out() -> None:
    body = await _body("openai/gpt-4o-mini",
                       ModelSettings(response_format={"type": "json_object"}))
    assert body["response_format"] == {"type": "json_object"}
    plain = await _body("openai/gpt-4o-mini", ModelSettings())
    assert not {"temperature", "reasoning_effort", "response_format",
                "parallel_tool_calls"} & set(plain)


async def test_anthropic_body_carries_every_setting() -> None:
    body = await _body("anthropic/claude-sonnet-4-5", ModelSettings(
        temperature=1.0, thinking_budget=2048), max_tokens=4096, parallel_tool_calls=False)
    head = {k: v for k, v in body.items() if k not in ("messages", "tools", "system")}
    assert head == {"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": True,
                    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
                    "thinking": {"type": "enabled", "budget_tokens": 2048},
                    "temperature": 1.0}


@pytest.mark.parametrize("kind", ["json_object", "json_schema"])
async def test_anthropic_refuses_a_json_response_format(kind: str) -> None:
    with FakeOpenAI([reply("x")]) as fake:
        agent = Agent("anthropic/claude-sonnet-4-5", base_url=fake.base_url, api_key="k",
                      model_settings=ModelSettings(response_format={"type": kind}))
        result = await agent.run("hi")
    assert result.stop_reason == "llm_api_error" and "output_type" in (result.error or "")
    assert fake.requests == []  # refused before anything was sent


async def test_settings_survive_a_reload(tmp_path: Any) -> None:
    store = f"sqlite:///{tmp_path}/a.db"
    settings = ModelSettings(temperature=0.3, reasoning_effort="high")
    agent = await Agent.acreate("openai/gpt-4o-mini", store=store, name="s",
                                model_settings=settings)
    loaded = await Agent.aload(agent.id, store=store)
    assert loaded.model_settings == settings
