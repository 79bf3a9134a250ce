"""What a source tool's call returns over HTTP with letta-client, as Letta words it: a
return cut to the tool's ``return_char_limit`` with Letta's note, an error as ``Error
executing function NAME: TYPE: message`` with the traceback in ``stderr``, and a tool made
the way ``upsert_from_function(args_schema=...)`` makes one (its ``args_json_schema``)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from typing import Any

import letta_client
import pytest
from letta_client import Letta
from pydantic import BaseModel, Field

from stateloop.testing.scripted import call, reply
from test_server_support import Script, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

LONG = '''
def long_text(n: int) -> str:
    """Say a lot.

    Args:
        n: How many characters.
    """
    return "x" * n
'''

FAILING = '''
def failing(why: str) -> str:
    """Fail on purpose.

    Args:
        why: The reason.
    """
    print("about to fail")
    raise ValueError(why)
'''

# The source as ``inspect.getsource`` gives it: ``List`` and ``Step`` come from the
# caller's module, not from this text.
PLAN = '''
def plan(steps: List[Step], note: str = "none") -> str:
    """Make a plan.

    Args:
        steps: The steps, in order.
        note: A note for the cook.
    """
    return f"{len(steps)} steps, first {steps[0]['title']} for {steps[0]['minutes']} min; {note}"
'''


class Step(BaseModel):
    title: str
    minutes: int


class PlanArgs(BaseModel):
    steps: list[Step] = Field(..., description="The steps, in order.")
    note: str = "none"


def run_tool(client: Letta, script: Script, tool: str, **arguments: Any) -> Any:
    """The tool_return_message of one call to ``tool``, as answered and as listed after."""
    agent = new_agent(client, tools=[tool])
    script.set(call(tool, **arguments), reply("done"))
    response = client.agents.messages.create(agent.id, input="go")
    answered = [m for m in response.messages if m.message_type == "tool_return_message"]
    listed = [m for m in client.agents.messages.list(agent.id, order="asc")
              if m.message_type == "tool_return_message"]
    fields = ("id", "tool_call_id", "status", "tool_return", "stdout", "stderr")
    assert len(answered) == 1 and [m.model_dump(include=set(fields)) for m in listed] == [
        answered[0].model_dump(include=set(fields))]
    return answered[0]


def test_return_char_limit_cuts_with_lettas_note(client: Letta, script: Script) -> None:
    tool = client.tools.upsert(source_code=LONG, return_char_limit=40)
    assert tool.return_char_limit == 40
    returned = run_tool(client, script, "long_text", n=100)
    expected = ("x" * 40 + "... [NOTE: function output was truncated since it exceeded "
                "the character limit (100 > 40)]")
    assert (returned.status, returned.tool_return) == ("success", expected)
    assert script.requests[1].messages[-1].text == expected  # what the model read
    assert run_tool(client, script, "long_text", n=40).tool_return == "x" * 40


def test_a_failing_tool_reads_as_in_letta_with_its_traceback(client: Letta,
                                                            script: Script) -> None:
    client.tools.upsert(source_code=FAILING)
    returned = run_tool(client, script, "failing", why="no eggs")
    assert returned.status == "error"
    assert returned.tool_return == "Error executing function failing: ValueError: no eggs"
    assert returned.stderr is not None and len(returned.stderr) == 1
    assert returned.stderr[0].startswith("Traceback (most recent call last):")
    assert 'File "<tool failing>", line 9, in failing' in returned.stderr[0]
    assert "sandbox" not in returned.stderr[0]  # the tool's frames only
    assert returned.stderr[0].rstrip().endswith("ValueError: no eggs")
    assert returned.stdout == ["about to fail\n"]


def test_args_json_schema_gives_the_parameters(client: Letta, script: Script) -> None:
    with pytest.raises(letta_client.BadRequestError, match="Step"):
        client.tools.upsert(source_code=PLAN)  # its hints cannot be read from the text alone
    # What upsert_from_function(func=plan, args_schema=PlanArgs) sends.
    tool = client.tools.upsert(source_code=PLAN, args_json_schema=PlanArgs.model_json_schema())
    assert tool.name == "plan" and tool.args_json_schema == PlanArgs.model_json_schema()
    schema = tool.json_schema
    assert schema is not None and schema["description"] == "Make a plan."
    parameters = schema["parameters"]
    assert parameters["required"] == ["steps"]
    assert parameters["properties"]["steps"] == {
        "type": "array", "items": {"$ref": "#/$defs/Step"}, "description": "The steps, in order."}
    assert parameters["properties"]["note"] == {
        "type": "string", "default": "none", "description": "A note for the cook."}
    assert set(parameters["$defs"]["Step"]["properties"]) == {"title", "minutes"}
    returned = run_tool(client, script, "plan", steps=[{"title": "boil", "minutes": 3}])
    assert (returned.status, returned.tool_return) == (
        "success", "1 steps, first boil for 3 min; none")
    # A new args_json_schema on PATCH gives new parameters.
    class Renamed(BaseModel):
        steps: list[Step]
        note: str = Field(..., description="Now required.")

    changed = client.tools.update(tool.id, args_json_schema=Renamed.model_json_schema())
    assert changed.json_schema is not None
    assert changed.json_schema["parameters"]["required"] == ["steps", "note"]
    assert changed.json_schema["parameters"]["properties"]["note"]["description"] == (
        "Now required.")
    with pytest.raises(letta_client.BadRequestError, match="args_json_schema"):
        client.tools.upsert(source_code=PLAN, args_json_schema={"properties": ["steps"]})
