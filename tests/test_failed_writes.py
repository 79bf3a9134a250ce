"""A step whose write fails: the run fails saying so, nothing half-written stays, and the
agent goes on from what was last stored, live and after a restart."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from stateloop import Agent, Approval, tool
from stateloop.messages import Message
from stateloop.store import open_store
from stateloop.testing import ScriptedModel, assert_transcript_valid, call, reply
from unwritable import WAYS, require, unwritable


def echo() -> ScriptedModel:
    return ScriptedModel(lambda request: reply(f"echo {request.messages[-1].text}"))


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages[1:]]  # past the system prompt


@pytest.mark.parametrize("way", WAYS)
async def test_a_step_that_cannot_be_stored_fails_the_run_and_the_agent_goes_on(
        tmp_path: Path, way: str) -> None:
    require(way, tmp_path)
    path = tmp_path / "agents.db"
    url = f"sqlite:///{path}"
    agent = await Agent.acreate(echo(), store=url, name="ada")
    await agent.run("one")
    await agent.save()
    stored = [m.id for m in agent.messages]

    with unwritable(path, way):
        failed = await agent.run("two")
    assert failed.stop_reason == "error"
    assert failed.error is not None
    assert failed.error.startswith("the step could not be stored: ")
    assert [m.id for m in agent.messages] == stored  # as last stored
    assert failed.messages == []

    again = await agent.run("three")
    assert (again.stop_reason, again.output) == ("end_turn", "echo three")
    assert texts(agent.messages) == ["one", "echo one", "three", "echo three"]
    run = await agent.store.get_run(failed.run_id)  # written once the file was writable
    assert (run.status, run.stop_reason) == ("failed", "error")
    assert run.error is not None and "could not be stored" in run.error

    elsewhere = await open_store(url)  # as a restarted process would
    try:
        loaded = await Agent.aload("ada", store=elsewhere, model=echo())
        assert [m.id for m in loaded.messages] == [m.id for m in agent.messages]
        assert (await loaded.run("four")).output == "echo four"
        assert (await elsewhere.get_run(failed.run_id)).status == "failed"
    finally:
        await elsewhere.close()


async def test_what_lands_of_a_failing_run_is_the_steps_before_the_failure(
        tmp_path: Path) -> None:
    path = tmp_path / "agents.db"

    @tool
    def note(text: str) -> str:
        """Note something."""
        return f"noted {text}"

    @tool
    async def break_the_disk() -> str:
        """Make every later message insert fail (once the steps before have landed)."""
        await agent.store.flush()
        with sqlite3.connect(path) as raw:
            raw.execute("CREATE TRIGGER refuse_messages BEFORE INSERT ON messages "
                        "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END")
        return "broken"

    model = ScriptedModel([call("note", text="a"), call("break_the_disk"), reply("back")])
    agent = await Agent.acreate(model, store=f"sqlite:///{path}", name="ada",
                                tools=[note, break_the_disk])
    result = await agent.run("go")
    assert len(model.requests) == 2  # the failed write stopped the run before the next call
    assert result.stop_reason == "error"
    assert result.error is not None and "disk on fire" in result.error
    # The first step landed; the one whose write failed, and everything after, did not.
    assert texts(agent.messages) == ["go", "", "noted a"]
    assert_transcript_valid(agent.messages)
    assert [m.id for m in result.messages] == [m.id for m in agent.messages[1:]]
    assert (await agent.store.get_run(result.run_id)).status == "failed"

    with sqlite3.connect(path) as raw:
        raw.execute("DROP TRIGGER refuse_messages")
    assert (await agent.run("again")).output == "back"
    elsewhere = await open_store(f"sqlite:///{path}")
    try:
        loaded = await Agent.aload("ada", store=elsewhere, model=echo(),
                                   tools=[note, break_the_disk])
        assert texts(loaded.messages) == ["go", "", "noted a", "again", "back"]
    finally:
        await elsewhere.close()


async def test_an_in_context_list_naming_lost_messages_is_repaired_on_load(
        tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    url = f"sqlite:///{path}"
    agent = await Agent.acreate(echo(), store=url, name="ada")
    await agent.run("one")
    await agent.save()
    kept = [m.id for m in agent.messages]
    # What an older stateloop left after a failed step: ids of messages never stored.
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE agents SET in_context_message_ids = ?, in_context_after_seq = "
                    "(SELECT max(seq) FROM messages)",
                    (json.dumps([*kept[:2], "message-lost-1", *kept[2:], "message-lost-2"]),))

    elsewhere = await open_store(url)
    try:
        loaded = await Agent.aload("ada", store=elsewhere, model=echo())
        assert [m.id for m in loaded.messages] == kept
        assert (await elsewhere.get_agent(loaded.id)).in_context_message_ids == kept
        assert (await loaded.run("two")).output == "echo two"
    finally:
        await elsewhere.close()


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch."""
    return f"launched at {target}"


async def test_an_approval_is_waiting_exactly_when_the_store_says_so(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    model = ScriptedModel([call("launch", target="moon"), reply("ok"),
                           call("launch", target="mars"), reply("launched")])
    agent = await Agent.acreate(model, store=f"sqlite:///{path}", name="ada", tools=[launch])
    with unwritable(path, "trigger"):  # the paused step cannot be stored
        failed = await agent.run("go")
    assert (failed.stop_reason, failed.pending_approvals) == ("error", [])
    assert agent.pending_approval is None and texts(agent.messages) == []
    assert (await agent.run("hi")).output == "ok"

    paused = await agent.run("launch")
    [requested] = paused.pending_approvals
    calls = len(model.requests)
    with unwritable(path, "trigger"):  # the approved step cannot be stored
        resumed = await agent.run(approvals=[Approval(requested.id, approve=True)])
    assert len(model.requests) == calls  # the failed write stopped it before a model call
    assert resumed.stop_reason == "error"
    assert [c.id for c in resumed.pending_approvals] == [requested.id]  # waiting again
    assert agent.pending_approval is not None
    assert agent.pending_approval.requested == [requested.id]
    done = await agent.run(approvals=[Approval(requested.id, approve=True)])
    assert done.output == "launched"
    assert_transcript_valid(agent.messages)
