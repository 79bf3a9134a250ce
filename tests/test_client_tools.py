"""Tools offered for one run and run by the caller: ``agent.run(tools=[client_tool(...)])``."""

from __future__ import annotations

from stateloop import Agent, Approval
from stateloop.testing import ScriptedModel, call, reply
from stateloop.tools.client import client_tool

PICK = client_tool("pick_file", "Ask the user to pick a file.",
                   {"type": "object", "properties": {"prompt": {"type": "string"}}})


async def test_a_client_tool_pauses_until_the_caller_answers_it() -> None:
    model = ScriptedModel([call("pick_file", prompt="Which?"), reply("You chose notes.txt."),
                           reply("Hi.")])
    agent = Agent(model=model, system="You are helpful.")
    paused = await agent.run("open a file", tools=[PICK])
    assert paused.stop_reason == "requires_approval"
    [pending] = paused.pending_approvals
    assert [t.name for t in model.requests[0].tools] == ["pick_file"]
    done = await agent.run(approvals=[Approval(pending.id, result="notes.txt")], tools=[PICK])
    assert (done.stop_reason, done.output) == ("end_turn", "You chose notes.txt.")
    assert model.requests[1].messages[-1].text == "notes.txt"
    await agent.run("hello")
    assert model.requests[2].tools == []  # offered to the runs that bring it only
