"""Client-side tools over HTTP with letta-client: ``client_tools`` on a message request are
offered to the model for that run; a call to one stops the run with ``requires_approval``
and an ``approval_request_message``, and the client resumes it with the tool's result."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from typing import Any

import letta_client
import pytest
from letta_client import Letta

from stateloop.testing.scripted import call, reply
from test_server_support import Script, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

WEATHER = {"name": "get_weather", "description": "The weather in a city now.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}

LOOKUP = '''
def lookup(key: str) -> str:
    """Look a key up on the server.

    Args:
        key: The key.
    """
    return "server value"
'''


def offered(script: Script, index: int = -1) -> dict[str, Any]:
    return {spec.name: spec for spec in script.requests[index].tools}


def tool_result(call_id: str, text: str) -> list[Any]:
    return [{"type": "approval", "approvals": [{"type": "tool", "tool_call_id": call_id,
                                                "status": "success", "tool_return": text}]}]


def test_a_client_tool_pauses_the_run_and_its_result_resumes_it(client: Letta,
                                                                script: Script) -> None:
    agent = new_agent(client)
    script.set(call("get_weather", city="Paris"))
    paused = client.agents.messages.create(agent.id, input="Weather in Paris?",
                                           client_tools=[WEATHER])
    spec = offered(script)["get_weather"]
    assert (spec.description, spec.parameters) == (WEATHER["description"],
                                                   WEATHER["parameters"])
    assert paused.stop_reason.stop_reason == "requires_approval"
    request = paused.messages[-1]
    assert request.message_type == "approval_request_message"
    assert request.tool_call.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(request.tool_call.arguments) == {"city": "Paris"}  # type: ignore
    call_id = request.tool_call.tool_call_id  # type: ignore[union-attr]
    state = client.agents.retrieve(agent.id, include=["agent.pending_approval"])
    assert state.pending_approval is not None

    script.set(reply("It is sunny in Paris."))
    done = client.agents.messages.create(agent.id, messages=tool_result(call_id, "sunny, 21C"),
                                         client_tools=[WEATHER])
    assert [m.message_type for m in done.messages] == ["tool_return_message",
                                                       "assistant_message"]
    assert done.messages[0].tool_return == "sunny, 21C"  # type: ignore[union-attr]
    assert done.stop_reason.stop_reason == "end_turn"
    assert script.requests[-1].messages[-1].text == "sunny, 21C"
    assert "get_weather" in offered(script)
    state = client.agents.retrieve(agent.id, include=["agent.pending_approval"])
    assert state.pending_approval is None

    script.set(reply("Hello."))
    client.agents.messages.create(agent.id, input="hi")  # a run that does not send them
    assert "get_weather" not in offered(script)


def test_streamed_and_over_a_server_tool_of_the_same_name(client: Letta,
                                                          script: Script) -> None:
    client.tools.upsert(source_code=LOOKUP)
    agent = new_agent(client, tools=["lookup"])
    mine = {"name": "lookup", "description": "Look a key up on the client."}
    script.set(call("lookup", key="k"))
    frames = list(client.agents.messages.create(agent.id, input="look k up", streaming=True,
                                                client_tools=[mine]))
    spec = offered(script)["lookup"]
    assert spec.description == "Look a key up on the client."  # the client's wins
    kinds = [f.message_type for f in frames]
    assert "approval_request_message" in kinds and "tool_return_message" not in kinds
    request = next(f for f in frames if f.message_type == "approval_request_message")
    script.set(reply("Got it."))
    done = client.agents.messages.create(
        agent.id, messages=tool_result(request.tool_call.tool_call_id, "client value"))
    assert done.messages[0].tool_return == "client value"  # type: ignore[union-attr]


def test_a_client_tool_needs_a_usable_name(client: Letta) -> None:
    agent = new_agent(client)
    with pytest.raises(letta_client.UnprocessableEntityError, match="client_tools"):
        client.agents.messages.create(agent.id, input="hi",
                                      client_tools=[{"name": "has spaces"}])
