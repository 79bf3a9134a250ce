"""Status codes and texts a letta-client app branches on, as Letta 0.16.8 answers them:
input while an approval is pending (409 ``PENDING_APPROVAL``), approvals that answer nothing
pending or other calls (400, Letta's words), and tool definitions that do not fit their
source (400, where request validation is 422)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from typing import Any

import letta_client
import pytest
from letta_client import Letta

from stateloop.server.errors import NO_PENDING_APPROVAL, PENDING_APPROVAL
from stateloop.testing.scripted import call, reply
from test_server_support import Script, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

WEATHER = {"name": "get_weather", "description": "The weather in a city now.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}
ECHO = '''
def echo(text: str) -> str:
    """Say it back.

    Args:
        text: What to say.
    """
    return text
'''


def approval(call_id: str) -> list[dict[str, Any]]:
    return [{"type": "approval", "approvals": [{"type": "tool", "tool_call_id": call_id,
                                                "status": "success", "tool_return": "sunny"}]}]


def test_approval_errors_are_letta_s(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    with pytest.raises(letta_client.BadRequestError) as nothing_pending:
        client.agents.messages.create(agent.id, messages=approval("call-none"))  # type: ignore
    assert nothing_pending.value.body == {"detail": NO_PENDING_APPROVAL}

    script.set(call("get_weather", city="Oslo"))
    paused = client.agents.messages.create(agent.id, input="weather?", client_tools=[WEATHER])
    request = paused.messages[-1]
    assert request.message_type == "approval_request_message"
    call_id = request.tool_call.tool_call_id  # type: ignore[union-attr]

    expected = {"detail": {"code": "PENDING_APPROVAL", "message": PENDING_APPROVAL,
                           "pending_request_id": request.id}}
    for streaming in (False, True):
        with pytest.raises(letta_client.ConflictError) as pending:
            client.agents.messages.create(agent.id, input="hello?", streaming=streaming)
        assert pending.value.body == expected
    with pytest.raises(letta_client.ConflictError) as pending:
        client.agents.messages.create_async(agent.id, input="hello?")
    assert pending.value.body == expected

    with pytest.raises(letta_client.BadRequestError) as wrong:
        client.agents.messages.create(agent.id, messages=approval("call-nope"))  # type: ignore
    assert wrong.value.body == {"detail": f"Invalid tool call IDs. Expected '['{call_id}']', "
                                          "but received '['call-nope']'."}

    script.set(reply("Sunny in Oslo."))
    done = client.agents.messages.create(agent.id, messages=approval(call_id))  # type: ignore
    assert done.stop_reason.stop_reason == "end_turn"
    with pytest.raises(letta_client.BadRequestError) as after:
        client.agents.messages.create(agent.id, messages=approval("call-other"))  # type: ignore
    assert after.value.body == {"detail": NO_PENDING_APPROVAL}


def test_a_tool_definition_that_does_not_fit_its_source_is_400(client: Letta) -> None:
    schema = {"name": "shout", "description": "Shout it.",
              "parameters": {"type": "object", "properties": {}}}
    for send in (client.tools.create, client.tools.upsert):
        with pytest.raises(letta_client.BadRequestError) as mismatch:
            send(source_code=ECHO, json_schema=schema)
        assert mismatch.value.body == {"detail": (
            "Tool name 'shout' does not match the name in the JSON schema 'shout' or in the "
            f"source code `{ECHO}`")}
        with pytest.raises(letta_client.BadRequestError, match="line 1"):
            send(source_code="def broken(:\n  pass")
        with pytest.raises(letta_client.BadRequestError, match="type hint"):
            send(source_code="def bare(text):\n    return text\n")
    tool = client.tools.upsert(source_code=ECHO)
    renamed = ECHO.replace("def echo", "def echoed")
    with pytest.raises(letta_client.BadRequestError) as rename:
        client.tools.update(tool.id, source_code=renamed)
    assert rename.value.body == {"detail": (
        "Tool name 'echo' does not match the name in the JSON schema 'echoed' or in the "
        f"source code `{renamed}`")}
    # A request that fails validation itself stays FastAPI's (and Letta's) 422.
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.tools.create(source_code=ECHO, extra_body={"unknown_field": 1})
    assert client.tools.retrieve(tool.id).source_code == ECHO
