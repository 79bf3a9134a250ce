"""Tool-call arguments that no client could read back (nested past the limit or past the
parser, NaN, Infinity) are refused like any bad arguments: the model reads why, the run and
the agent go on, and every listing still serves."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import pytest
from letta_client import Letta

from stateloop.deepjson import MAX_DEPTH
from stateloop.testing.scripted import raw_call, reply
from test_server_support import Script, client, fake, new_agent, script, server  # noqa: F401 (fixtures)


def nested(levels: int) -> str:
    return '{"query": ' + '{"a": ' * (levels - 1) + "1" + "}" * levels


@pytest.mark.parametrize(("arguments", "why"), [
    (nested(MAX_DEPTH + 1), f"nest deeper than {MAX_DEPTH} levels"),
    (nested(300), f"nest deeper than {MAX_DEPTH} levels"),  # past what responses serialize
    (nested(5000), f"nest deeper than {MAX_DEPTH} levels"),  # past what json.loads reads
    ('{"query": NaN}', "NaN is not a JSON number"),
    ('{"query": -Infinity}', "-Infinity is not a JSON number"),
    ('{"query": 1e999}', "1e999 is too large for a number"),
])
def test_arguments_no_client_could_read_are_refused_and_the_agent_goes_on(
        client: Letta, script: Script, arguments: str, why: str) -> None:
    agent = new_agent(client, tools=["conversation_search"])
    script.set(raw_call("conversation_search", arguments), reply("sorry"))
    response = client.agents.messages.create(agent.id, input="search")
    assert response.stop_reason.stop_reason == "end_turn"
    [answer] = [m.tool_return for m in response.messages  # type: ignore[union-attr]
                if m.message_type == "tool_return_message"]
    assert why in answer
    listed = client.agents.messages.list(agent.id, limit=50)
    assert any(getattr(m, "content", None) == "sorry" for m in listed)
    script.set(reply("still here"))
    assert client.agents.messages.create(agent.id, input="again").messages[0].content == (
        "still here")


def test_arguments_nested_to_the_limit_are_taken(client: Letta, script: Script) -> None:
    agent = new_agent(client, tools=["conversation_search"])
    script.set(raw_call("conversation_search", nested(MAX_DEPTH)), reply("done"))
    response = client.agents.messages.create(agent.id, input="search")
    [answer] = [m.tool_return for m in response.messages  # type: ignore[union-attr]
                if m.message_type == "tool_return_message"]
    assert "nest deeper" not in answer  # refused for its type, by the tool's own schema
