"""Typed final answers (``output_type``): the final-answer tool with the scripted model and
Claude's wire format, JSON-schema mode through the fake OpenAI server; retries with the
validation error, then ``invalid_output``."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from stateloop import Agent, tool
from stateloop.errors import ConfigError
from stateloop.events import RunEnd
from stateloop.hooks import Hooks
from stateloop.llm.base import ModelRequest, ModelResponse
from stateloop.structured_output import FINAL_TOOL, strict_schema
from stateloop.testing import ScriptedModel, call, reply
from stateloop.testing.fake_openai import FakeItem, FakeOpenAI


class City(BaseModel):
    name: str
    population: int


class Loose(BaseModel):
    name: str
    note: str | None = None


@tool
def lookup(city: str) -> str:
    """Facts about a city."""
    return f"{city}: 2.1 million people"


async def test_final_tool_answer_becomes_the_validated_output() -> None:
    model = ScriptedModel([call("lookup", city="Paris"),
                           call(FINAL_TOOL, name="Paris", population=2_100_000)])
    agent = Agent(model, tools=[lookup], output_type=City, include_base_tools=False)
    result = await agent.run("How big is Paris?")
    assert result.stop_reason == "end_turn" and result.steps == 2
    assert result.output == City(name="Paris", population=2_100_000)
    first = model.requests[0]
    assert first.tool_choice == "required"  # the answer has to come as a call
    final = next(spec for spec in first.tools if spec.name == FINAL_TOOL)
    assert final.parameters["required"] == ["name", "population"]
    assert first.settings.response_format is None


async def test_invalid_answer_is_sent_back_with_the_error_then_accepted() -> None:
    model = ScriptedModel([call(FINAL_TOOL, name="Paris", population="many"),
                           call(FINAL_TOOL, name="Paris", population=2_100_000)])
    agent = Agent(model, output_type=City, include_base_tools=False)
    result = await agent.run("How big is Paris?")
    assert result.stop_reason == "end_turn"
    assert result.output == City(name="Paris", population=2_100_000)
    sent_back = model.requests[1].messages[-1]
    assert sent_back.role == "tool" and "population" in sent_back.text
    assert "Validation failed" in sent_back.text


async def test_retries_run_out_with_invalid_output() -> None:
    model = ScriptedModel([call(FINAL_TOOL, name="Paris")] * 2 + [reply("Paris is big.")])
    agent = Agent(model, output_type=City, output_retries=2, include_base_tools=False)
    result = await agent.run("How big is Paris?")
    assert result.stop_reason == "invalid_output"
    assert result.output is None and result.steps == 3
    assert "output_retries=2" in (result.error or "")
    assert f"text, not a call to {FINAL_TOOL}" in (result.error or "")
    assert all("Validation failed" in m.text for m in result.messages if m.role == "tool")


async def test_per_run_output_type_and_a_non_object_type() -> None:
    model = ScriptedModel([call(FINAL_TOOL, response=[3, 1, 2]), reply("plain")])
    agent = Agent(model, include_base_tools=False)
    result = await agent.run("Three numbers?", output_type=list[int])
    assert result.output == [3, 1, 2]
    assert (await agent.run("And now?")).output == "plain"  # the agent's own: text
    assert FINAL_TOOL not in {spec.name for spec in model.requests[1].tools}


async def test_stream_carries_the_answer_on_run_end() -> None:
    agent = Agent(ScriptedModel([call(FINAL_TOOL, name="Oslo", population=700_000)]),
                  include_base_tools=False)
    events = [e async for e in agent.stream("Oslo?", output_type=City)]
    end = events[-1]
    assert isinstance(end, RunEnd) and end.data == City(name="Oslo", population=700_000)
    assert json.loads(end.output) == {"name": "Oslo", "population": 700_000}


def test_run_sync_and_bad_settings_name_the_field() -> None:
    agent = Agent(ScriptedModel([call(FINAL_TOOL, name="Rome", population=2_800_000)]),
                  include_base_tools=False)
    assert agent.run_sync("Rome?", output_type=City).output.population == 2_800_000
    with pytest.raises(ConfigError, match="output_retries"):
        Agent(ScriptedModel([]), output_type=City, output_retries=-1)
    with pytest.raises(ConfigError, match="output_type"):
        Agent(ScriptedModel([]), output_type=object())


async def test_openai_json_schema_mode_retries_then_validates() -> None:
    script = [reply('{"name": "Paris"}'), reply('{"name": "Paris", "population": 2100000}')]
    with FakeOpenAI(script) as fake:
        agent = Agent("openai/gpt-4o-mini", base_url=fake.base_url, api_key="k",
                      output_type=City, include_base_tools=False)
        result = await agent.run("How big is Paris?")
    assert result.stop_reason == "end_turn"
    assert result.output == City(name="Paris", population=2_100_000)
    first, second = (r.body for r in fake.requests)
    assert first["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "City", "strict": True, "schema": {
            "type": "object", "title": "City", "additionalProperties": False,
            "required": ["name", "population"],
            "properties": {"name": {"title": "Name", "type": "string"},
                           "population": {"title": "Population", "type": "integer"}}}}}
    assert "tools" not in first and "tool_choice" not in first
    retry = second["messages"][-1]
    assert retry["role"] == "user" and "population" in retry["content"]


async def test_openai_json_schema_mode_runs_out_of_retries() -> None:
    with FakeOpenAI([reply("not json")] * 2) as fake:
        agent = Agent("openai/gpt-4o-mini", base_url=fake.base_url, api_key="k",
                      output_type=City, output_retries=1, include_base_tools=False)
        result = await agent.run("How big is Paris?")
    assert result.stop_reason == "invalid_output" and result.output is None
    assert "not valid JSON" in (result.error or "") and len(fake.requests) == 2


async def test_claude_gets_the_final_tool_over_its_wire_format() -> None:
    script = [call(FINAL_TOOL, name="Lyon", population=500_000)]
    with FakeOpenAI(script) as fake:
        agent = Agent("anthropic/claude-haiku-4-5", base_url=fake.base_url, api_key="k",
                      output_type=City, include_base_tools=False)
        result = await agent.run("Lyon?")
    assert result.output == City(name="Lyon", population=500_000)
    body = fake.requests[0].body
    assert body["tool_choice"] == {"type": "any"}
    assert [t["name"] for t in body["tools"]] == [FINAL_TOOL]
    assert "response_format" not in body


def test_strict_schema_only_when_every_field_is_required() -> None:
    assert strict_schema(Loose.model_json_schema()) is None
    nested = {"type": "object", "properties": {"city": {"$ref": "#/$defs/City"}},
              "required": ["city"], "$defs": {"City": City.model_json_schema()}}
    strict = strict_schema(nested)
    assert strict["additionalProperties"] is False
    assert strict["$defs"]["City"]["additionalProperties"] is False


async def test_fake_provider_answers_by_the_response_format_and_user_hooks_still_run() -> None:
    seen: list[str] = []

    def answer(request: ModelRequest) -> FakeItem:
        schema = (request.settings.response_format or {}).get("json_schema", {})
        return reply(json.dumps({"name": "Nice", "population": 340_000})
                     if schema.get("name") == "City" else "no schema")

    def before(request: ModelRequest) -> None:
        seen.append("before")

    def after(response: ModelResponse) -> None:
        seen.append("after")

    with FakeOpenAI(answer) as fake:
        agent = Agent("openai/gpt-4o-mini", base_url=fake.base_url, api_key="k",
                      include_base_tools=False,
                      hooks=Hooks(before_model_call=before, after_model_call=after))
        typed = await agent.run("Nice?", output_type=City)
        plain = await agent.run("Again?")
    assert typed.output == City(name="Nice", population=340_000)
    assert plain.output == "no schema" and seen == ["before", "after"] * 2
