"""Human approval: pause before a call, resume by approving, denying or supplying a result."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from patience import ANSWERS
from stateloop import Agent, Hooks, tool
from stateloop.approvals import Approval, ApprovalError
from stateloop.testing import ScriptedModel, assert_transcript_valid, call, calls, reply

executed: list[str] = []


@tool(requires_approval=True)
def wire_money(amount: int, to: str) -> str:
    """Send money."""
    executed.append(f"wire {amount} to {to}")
    return f"sent {amount} to {to}"


@tool
def lookup(name: str) -> str:
    """Look someone up."""
    executed.append(f"lookup {name}")
    return f"{name}: account 42"


@pytest.fixture(autouse=True)
def clear_log():
    executed.clear()


def bank_agent(script, **options) -> Agent:
    return Agent(model=ScriptedModel(script), tools=[wire_money, lookup], **options)


async def test_pause_then_approve():
    agent = bank_agent([call("wire_money", amount=5, to="bob"), reply("Sent.")])
    paused = await agent.run("pay bob 5")
    assert paused.stop_reason == "requires_approval"
    [pending] = paused.pending_approvals
    assert (pending.name, pending.arguments) == ("wire_money", {"amount": 5, "to": "bob"})
    assert executed == []
    assert_transcript_valid(agent.messages, pending=[pending.id])

    done = await agent.run(approvals=[Approval(pending.id, approve=True)])
    assert executed == ["wire 5 to bob"]
    assert done.stop_reason == "end_turn" and done.output == "Sent."
    assert [m.role for m in done.messages] == ["tool", "assistant"]
    assert agent.pending_approval is None
    assert_transcript_valid(agent.messages)


async def test_approval_request_event_and_state():
    agent = bank_agent([call("wire_money", amount=5, to="bob")])
    events = [e async for e in agent.stream("pay")]
    types = [e.type for e in events]
    assert types[-4:] == ["message", "approval_request", "step_end", "run_end"]
    request = events[-3]
    assert [c.name for c in request.tool_calls] == ["wire_money"]
    assert events[-1].pending_approval is agent.pending_approval
    assert "tool_execution_start" not in types


async def test_a_resumed_step_ends_as_a_model_step_does():
    steps: list[tuple[int, int]] = []
    agent = bank_agent([calls(call("lookup", name="bob"), call("wire_money", amount=5, to="bob")),
                        reply("Sent.")],
                       hooks=Hooks(after_step=lambda r: steps.append((r.step, len(r.messages)))))
    await agent.run("pay bob")
    assert steps == []  # a paused step is not over: after_step waits for its resume
    ids = [c.id for c in agent.pending_approval.calls]
    events = [e async for e in agent.stream(approvals=[Approval(ids[1])])]
    assert [e.type for e in events] == [
        "run_start",
        "tool_execution_start", "tool_execution_start",
        "tool_execution_end", "message", "tool_execution_end", "message",
        "step_end",  # step 0: the paused step, finished
        "step_start", "text_delta", "message", "step_end",
        "run_end",
    ]
    assert [e.step for e in events if e.type == "step_end"] == [0, 1]
    assert steps == [(0, 2), (1, 1)]
    assert executed == ["lookup bob", "wire 5 to bob"]
    assert_transcript_valid(agent.messages)


async def test_deny_with_reason_and_the_loop_goes_on():
    model = ScriptedModel([call("wire_money", amount=500, to="eve"), reply("Understood.")])
    agent = Agent(model=model, tools=[wire_money])
    paused = await agent.run("pay eve")
    done = await agent.run(approvals=[Approval(paused.pending_approvals[0].id, approve=False,
                                               reason="eve is not a customer")])
    assert executed == []
    denial = done.messages[0]
    assert denial.is_error
    assert denial.text == "request to call tool denied. User reason: eve is not a customer"
    assert model.requests[-1].messages[-1].text == denial.text
    assert done.output == "Understood."


async def test_mixed_batch_results_in_call_order():
    script = [calls(call("lookup", name="bob"), call("wire_money", amount=1, to="bob"),
                    call("wire_money", amount=2, to="eve")),
              reply("done")]
    agent = bank_agent(script)
    paused = await agent.run("go")
    ids = [c.id for c in paused.pending_approvals]
    assert len(ids) == 2 and executed == []  # nothing ran, not even the free lookup
    done = await agent.run(approvals=[Approval(ids[0]), Approval(ids[1], approve=False,
                                                                 reason="no")])
    assert executed == ["lookup bob", "wire 1 to bob"]
    assert [m.text for m in done.messages[:3]] == [
        "bob: account 42", "sent 1 to bob", "request to call tool denied. User reason: no"]
    assert_transcript_valid(agent.messages)


async def test_client_side_tool_result():
    @tool(requires_approval=True)
    def take_photo() -> str:
        """Runs on the user's phone."""
        raise AssertionError("never runs on the server")

    model = ScriptedModel([call("take_photo"), reply("Nice photo.")])
    agent = Agent(model=model, tools=[take_photo])
    paused = await agent.run("photo please")
    done = await agent.run(approvals=[Approval(paused.pending_approvals[0].id,
                                               result="photo.jpg (1.2 MB)")])
    assert done.messages[0].text == "photo.jpg (1.2 MB)" and not done.messages[0].is_error
    assert done.output == "Nice photo."


async def test_resume_from_saved_state_in_a_fresh_agent():
    first = bank_agent([call("wire_money", amount=7, to="bob")])
    paused = await first.run("pay bob 7")
    saved = json.dumps(first.export_state())

    model = ScriptedModel([reply("Paid.")])
    second = Agent(model=model, tools=[wire_money, lookup])
    second.import_state(json.loads(saved))
    assert second.pending_approval is not None
    with pytest.raises(ApprovalError, match="waiting for approval"):
        await second.run("something else")
    done = await second.run(approvals=[Approval(paused.pending_approvals[0].id)])
    assert executed == ["wire 7 to bob"]
    assert done.output == "Paid."
    sent = [m.role for m in model.requests[0].messages]
    assert sent == ["system", "user", "assistant", "tool"]
    assert_transcript_valid(second.messages)


async def test_same_approval_twice_runs_the_tool_once():
    agent = bank_agent([call("wire_money", amount=3, to="bob"), reply("ok")])
    paused = await agent.run("pay")
    approval = Approval(paused.pending_approvals[0].id)
    first, second = await asyncio.gather(agent.run(approvals=[approval]),
                                         agent.run(approvals=[approval]))
    assert executed == ["wire 3 to bob"]
    assert first.run_id == second.run_id and second.output == "ok"


async def test_unknown_or_missing_approvals_are_clear_errors():
    agent = bank_agent([calls(call("wire_money", amount=1, to="a"),
                              call("wire_money", amount=2, to="b"))])
    paused = await agent.run("pay")
    a, b = (c.id for c in paused.pending_approvals)
    with pytest.raises(ApprovalError, match="not awaiting approval"):
        await agent.run(approvals=[Approval("call-nope")])
    with pytest.raises(ApprovalError, match=f"no decision for pending tool calls: {b}"):
        await agent.run(approvals=[Approval(a)])
    assert agent.pending_approval is not None  # nothing was lost
    with pytest.raises(ApprovalError, match="no tool call is awaiting approval"):
        await bank_agent([]).run(approvals=[Approval(a)])


async def test_new_message_while_pending_is_an_error_not_a_drop():
    agent = bank_agent([call("wire_money", amount=1, to="a")])
    await agent.run("pay")
    before = agent.messages
    with pytest.raises(ApprovalError, match="before sending a new message"):
        await agent.run("hello?")
    assert agent.messages == before


async def test_cancel_denies_what_is_pending():
    agent = bank_agent([calls(call("lookup", name="x"), call("wire_money", amount=1, to="a")),
                        reply("ok")])
    await agent.run("go")
    agent.cancel()
    assert agent.pending_approval is None
    texts = [m.text for m in agent.messages[-2:]]
    assert texts[0] == "Tool call was cancelled before it finished."
    assert texts[1] == "request to call tool denied. User reason: the run was cancelled"
    assert executed == []
    assert_transcript_valid(agent.messages)
    assert (await agent.run("next")).output == "ok"


async def test_approval_timeout_denies_automatically():
    model = ScriptedModel([call("wire_money", amount=1, to="a"), reply("Timed out, sorry.")])
    agent = Agent(model=model, tools=[wire_money], approval_timeout=0.1)
    await agent.run("pay")
    deadline = time.monotonic() + ANSWERS
    while agent.last_result is None or agent.last_result.output != "Timed out, sorry.":
        assert time.monotonic() < deadline, "the timer never resumed the run"
        await asyncio.sleep(0.01)  # the timer resumes the run with a denial
    assert agent.last_result is not None and agent.last_result.output == "Timed out, sorry."
    denial = agent.messages[-2]
    assert denial.text == "request to call tool denied. User reason: no approval within 0.1 s"
    assert executed == []


async def test_expired_approval_is_denied_when_the_next_message_arrives():
    model = ScriptedModel([call("wire_money", amount=1, to="a"), reply("Sorry. Hello!")])
    first = Agent(model=model, tools=[wire_money], approval_timeout=30)
    await first.run("pay")
    state = first.export_state()
    state["pending_approval"]["created_at"] -= 60  # saved a minute ago, in another process
    second = Agent(model=model, tools=[wire_money], approval_timeout=30)
    second.import_state(state)
    result = await second.run("hello")
    assert [m.role for m in result.messages] == ["tool", "user", "assistant"]
    assert "no approval within 30 s" in result.messages[0].text
    assert_transcript_valid(second.messages)


async def test_requires_approval_rule_from_letta_json():
    @tool
    def delete_file(path: str) -> str:
        """Delete."""
        return "deleted"

    model = ScriptedModel([call("delete_file", path="/tmp/x"), reply("ok")])
    agent = Agent(model=model, tools=[delete_file],
                  tool_rules=[{"type": "requires_approval", "tool_name": "delete_file"}])
    paused = await agent.run("clean up")
    assert paused.stop_reason == "requires_approval"
    done = await agent.run(approvals=[Approval(paused.pending_approvals[0].id)])
    assert done.messages[0].text == "deleted"
