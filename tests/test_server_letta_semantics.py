"""What a letta-client app sees as Letta 0.16.8 answers it: ``POST /v1/tools`` updating the
tool of that name (tags kept unless given), a rename through ``json_schema``, the
``model_settings`` an agent created without them has, client tool returns holding images,
the system prompt's metadata, the approval response in the message list, and parallel
tool returns as one message."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import re

import httpx
import letta_client
import pytest
from letta_client import Letta

from letta_spec import assert_letta_shape
from stateloop.cli.items import ToolResultShown
from stateloop.cli.remote import FrameReader
from stateloop.memory.blocks import render_memory_metadata
from stateloop.testing.scripted import call, calls, reply
from test_server_support import Script, Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

LOUD = '''
def loud(text: str) -> str:
    """Say it loudly.

    Args:
        text: What to say.
    """
    return text.upper()
'''
LOUDER = LOUD.replace("text.upper()", "text.upper() + '!'")
LOUD_SCHEMA = {"description": "Say it loudly.",
               "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                              "required": ["text"]}}


def test_creating_a_tool_whose_name_exists_updates_it_and_keeps_its_tags(
        client: Letta, server: Server) -> None:
    first = client.tools.create(source_code=LOUD, tags=["voice"])
    raw = httpx.post(f"{server.url}/v1/tools", json={"source_code": LOUDER})
    assert raw.status_code == 200, raw.text  # was a 409
    assert_letta_shape("/v1/tools/", "post", raw.json())
    again = client.tools.retrieve(first.id)
    assert (again.id, again.source_code, again.tags) == (first.id, LOUDER, ["voice"])
    retagged = client.tools.create(source_code=LOUD, tags=["shout"])
    assert (retagged.id, retagged.tags, retagged.source_code) == (first.id, ["shout"], LOUD)
    upserted = client.tools.upsert(source_code=LOUDER)
    assert (upserted.id, upserted.tags) == (first.id, ["shout"])
    assert [t.id for t in client.tools.list(name="loud")] == [first.id]


def test_a_json_schema_naming_another_function_renames_the_tool(client: Letta,
                                                               script: Script) -> None:
    tool = client.tools.create(source_code=LOUD.replace("loud", "yell"))
    agent = new_agent(client, tool_ids=[tool.id],
                      tool_rules=[{"type": "exit_loop", "tool_name": "yell"}])
    renamed = LOUD.replace("loud", "holler")
    updated = client.tools.update(tool.id, source_code=renamed,
                                  json_schema={"name": "holler", **LOUD_SCHEMA})
    assert (updated.id, updated.name, updated.json_schema["name"]) == (
        tool.id, "holler", "holler")
    state = client.agents.retrieve(agent.id, include=["agent.tools"])
    assert [t.name for t in state.tools] == ["holler"]
    assert [r.tool_name for r in state.tool_rules] == ["holler"]
    script.set(call("holler", text="hi"))
    answer = client.agents.messages.create(agent.id, input="shout hi")
    [result] = [m for m in answer.messages if m.message_type == "tool_return_message"]
    assert (result.status, result.tool_return) == ("success", "HI")
    with pytest.raises(Exception, match="does not match"):  # the source defines holler only
        client.tools.update(tool.id, json_schema={"name": "bellow", **LOUD_SCHEMA})


def test_an_agent_created_without_model_settings_shows_the_providers_defaults(
        client: Letta, server: Server) -> None:
    openai = new_agent(client)
    raw = httpx.get(f"{server.url}/v1/agents/{openai.id}").json()
    assert_letta_shape("/v1/agents/{agent_id}", "get", raw)
    assert raw["model_settings"] == {  # was null
        "max_output_tokens": 4096, "parallel_tool_calls": True, "provider_type": "openai",
        "temperature": 1.0, "reasoning": {"reasoning_effort": "minimal"},
        "response_format": None, "strict": False}
    assert client.agents.retrieve(openai.id).api_model_settings.provider_type == "openai"  # type: ignore[union-attr]
    claude = new_agent(client, model="anthropic/claude-sonnet-4-5", max_tokens=2000)
    raw = httpx.get(f"{server.url}/v1/agents/{claude.id}").json()
    assert_letta_shape("/v1/agents/{agent_id}", "get", raw)
    assert raw["model_settings"] == {
        "max_output_tokens": 2000, "parallel_tool_calls": True, "provider_type": "anthropic",
        "temperature": 1.0, "thinking": {"type": "disabled", "budget_tokens": 1024},
        "response_format": None, "verbosity": None, "effort": None, "strict": False}
    listed = httpx.get(f"{server.url}/v1/agents", params={"limit": 1000}).json()
    assert_letta_shape("/v1/agents/", "get", listed)
    asked = new_agent(client, model_settings={"provider_type": "openai", "temperature": 0.2})
    assert client.agents.retrieve(asked.id).api_model_settings.temperature == 0.2  # type: ignore[union-attr]


WEATHER = {"name": "get_weather", "description": "The weather in a city now.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}
PIXEL = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5"
         "ErkJggg==")


def _pause_on_weather(client: Letta, script: Script, agent_id: str) -> str:
    script.set(call("get_weather", city="Oslo"))
    paused = client.agents.messages.create(agent_id, input="Weather?", client_tools=[WEATHER])
    return paused.messages[-1].tool_call.tool_call_id  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["approval", "tool_return"])
def test_a_client_tool_return_may_hold_text_and_image_parts(client: Letta, script: Script,
                                                           kind: str) -> None:
    agent = new_agent(client)
    call_id = _pause_on_weather(client, script, agent.id)
    parts = [{"type": "text", "text": "Sunny, 21C."}, {"type": "text", "text": "Radar:"},
             {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                          "data": PIXEL}}]
    result = {"type": "tool", "tool_call_id": call_id, "status": "success",
              "tool_return": parts}
    message = ({"type": "approval", "approvals": [result]} if kind == "approval"
               else {"type": "tool_return", "tool_returns": [result]})
    script.set(reply("Sunny."))
    done = client.agents.messages.create(agent.id, messages=[message],  # type: ignore[list-item]
                                         client_tools=[WEATHER])  # was a 422
    assert done.stop_reason.stop_reason == "end_turn"
    told = "Sunny, 21C.\nRadar: [Image omitted]"  # what Letta gives a chat model
    assert script.requests[-1].messages[-1].text == told
    [returned] = [m for m in done.messages if m.message_type == "tool_return_message"]
    assert returned.tool_return == told  # type: ignore[union-attr]


def test_after_an_approval_the_message_list_holds_the_approval_response(
        client: Letta, script: Script, server: Server) -> None:
    tool = client.tools.upsert(source_code=LOUD)
    agent = new_agent(client, tool_ids=[tool.id])
    client.agents.tools.update_approval("loud", agent_id=agent.id, body_requires_approval=True)
    script.set(call("loud", text="a"), call("loud", text="b"))
    first = client.agents.messages.create(agent.id, input="say a")
    request = first.messages[-1]
    assert request.message_type == "approval_request_message"
    script.set(call("loud", text="b"), reply("done"))
    answer = client.agents.messages.create(agent.id, messages=[{  # type: ignore[list-item]
        "type": "approval", "approvals": [{"type": "approval", "approve": True,
                                           "tool_call_id": request.tool_call.tool_call_id}]}])  # type: ignore[union-attr]
    # As in Letta, the response leaves the decision out (it is the request's input).
    assert "approval_response_message" not in [m.message_type for m in answer.messages]
    second = answer.messages[-1]
    assert second.message_type == "approval_request_message"
    script.set(reply("fine"))
    client.agents.messages.create(agent.id, messages=[{  # type: ignore[list-item]
        "type": "approval", "approvals": [{"type": "approval", "approve": False,
                                           "reason": "too loud",
                                           "tool_call_id": second.tool_call.tool_call_id}]}])  # type: ignore[union-attr]
    raw = httpx.get(f"{server.url}/v1/agents/{agent.id}/messages",
                    params={"limit": 100, "order": "asc"}).json()
    assert_letta_shape("/v1/agents/{agent_id}/messages", "get", raw)
    decisions = [m for m in raw if m["message_type"] == "approval_response_message"]
    assert [(m["approvals"], m["approve"], m["reason"]) for m in decisions] == [  # was none
        ([{"type": "approval", "tool_call_id": request.tool_call.tool_call_id,  # type: ignore[union-attr]
           "approve": True, "reason": None}], True, None),
        ([{"type": "approval", "tool_call_id": second.tool_call.tool_call_id,  # type: ignore[union-attr]
           "approve": False, "reason": "too loud"}], False, "too loud")]
    after = [raw[raw.index(m) + 1] for m in decisions]
    assert [(m["message_type"], m["status"]) for m in after] == [
        ("tool_return_message", "success"), ("tool_return_message", "error")]
    listed = client.agents.messages.list(agent.id, limit=100, order="asc").items
    assert [m.id for m in listed] == [m["id"] for m in raw]  # ids stable across listings

    client_agent = new_agent(client)
    call_id = _pause_on_weather(client, script, client_agent.id)
    script.set(reply("Sunny."))
    client.agents.messages.create(client_agent.id, client_tools=[WEATHER], messages=[{  # type: ignore[list-item]
        "type": "approval", "approvals": [{"type": "tool", "tool_call_id": call_id,
                                           "status": "success", "tool_return": "sunny"}]}])
    [decision] = [m for m in client.agents.messages.list(client_agent.id, limit=100).items
                  if m.message_type == "approval_response_message"]
    [returned] = decision.approvals  # type: ignore[union-attr,misc]
    assert (returned.type, returned.tool_call_id, returned.tool_return) == (
        "tool", call_id, "sunny")


STAMP = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} [AP]M "  # then the zone: UTC+0000, CET+0100


def _metadata(system: str) -> list[str]:
    section = system[system.index("<memory_metadata>"):system.index("</memory_metadata>")]
    return section.splitlines()[1:]


def test_the_system_prompt_names_the_agent_and_conversation_and_dates_as_letta(
        client: Letta, script: Script) -> None:
    agent = new_agent(client, timezone="Europe/Oslo")
    [system] = [m for m in client.agents.messages.list(agent.id, limit=100).items
                if m.message_type == "system_message"]
    lines = _metadata(system.content)  # type: ignore[union-attr]
    assert lines[:2] == [f"- AGENT_ID: {agent.id}", "- CONVERSATION_ID: default"]
    assert re.fullmatch(rf"- System prompt last recompiled: {STAMP}CET\+0100", lines[2]), lines
    assert lines[3:] == ["- 0 previous messages between you and the user are stored in "
                         "recall memory"]

    conversation = client.conversations.create(agent_id=agent.id)
    script.set(reply("hi"))
    list(client.conversations.messages.create(conversation.id, input="hello",
                                              include_pings=False))
    sent = _metadata(script.requests[-1].messages[0].text)
    assert sent[:2] == [f"- AGENT_ID: {agent.id}", f"- CONVERSATION_ID: {conversation.id}"]

    utc = new_agent(client)
    script.set(reply("ok"))
    client.agents.messages.create(utc.id, input="hi")
    sent = _metadata(script.requests[-1].messages[0].text)
    assert re.fullmatch(rf"- System prompt last recompiled: {STAMP}UTC\+0000", sent[2]), sent
    with pytest.raises(letta_client.UnprocessableEntityError, match="timezone"):
        new_agent(client, timezone="Mars/Olympus")


def test_the_archival_line_is_there_once_archival_memory_holds_something() -> None:
    lines = render_memory_metadata(3, 2, agent_id="agent-x", conversation_id="conv-y",
                                   timezone="UTC").splitlines()
    assert lines[1:3] == ["- AGENT_ID: agent-x", "- CONVERSATION_ID: conv-y"]
    assert lines[4:] == [
        "- 3 previous messages between you and the user are stored in recall memory",
        "- 2 total memories you created are stored in archival memory (use tools to access "
        "them)", "</memory_metadata>"]


def test_the_cli_shows_every_result_of_a_step_under_its_tools_name(
        client: Letta, script: Script, server: Server) -> None:
    client.tools.upsert(source_code=LOUD)
    client.tools.upsert(source_code=LOUD.replace("loud", "quiet").replace(".upper()", ".lower()"))
    agent = new_agent(client, tools=["loud", "quiet"])
    script.set(calls(call("loud", text="a"), call("quiet", text="B")), reply("done"))
    items: list[object] = []
    reader = FrameReader(items.append)
    for frame in client.agents.messages.create(agent.id, input="go", streaming=True,
                                               include_pings=False):
        reader.feed(frame.model_dump())
    assert [(i.name, i.text) for i in items if isinstance(i, ToolResultShown)] == [
        ("loud", "A"), ("quiet", "b")]
