"""Queued step checkpoints: when they land, that they land whole, and that failures stay
with the step that failed."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stateloop import Agent, tool
from stateloop.messages import Message, assistant, user
from stateloop.store import (
    AgentRecord,
    NotFoundError,
    StepRecord,
    StoreError,
    open_store,
)
from stateloop.store.sql import SqlStore
from stateloop.testing import ScriptedModel, call, reply


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await open_store(f"sqlite:///{tmp_path / 'queue.db'}")
    yield s
    await s.close()


def _stored_ids(path: str) -> list[str]:
    """What another connection (another process, say) sees committed."""
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT id FROM messages ORDER BY seq")]


async def test_a_queued_step_lands_at_the_next_turn_of_the_event_loop(store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    hello = user("hello")
    queued = store.queue_step(agent_id, [hello], in_context=[hello])
    assert not queued.done() and _stored_ids(store.path) == []
    await asyncio.sleep(0)
    assert queued.done() and queued.exception() is None
    assert _stored_ids(store.path) == [hello.id]
    assert (await store.get_agent(agent_id)).in_context_message_ids == [hello.id]


async def test_reads_see_steps_still_queued(store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    messages = [user("one"), assistant("two")]
    store.queue_step(agent_id, messages)
    assert [m.text for m in await store.list_messages(agent_id)] == ["one", "two"]


async def test_a_failing_step_in_a_group_fails_alone(store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    run = await store.create_run(agent_id, status="running")
    first, second, third = user("first"), assistant("second"), user("third")
    duplicate = Message.from_dict(first.to_dict())
    ok_1 = store.queue_step(agent_id, [first], step=StepRecord(run.id), in_context=[first])
    bad = store.queue_step(agent_id, [second, duplicate], step=StepRecord(run.id, index=1),
                           in_context=[first, second])
    ok_2 = store.queue_step(agent_id, [third], step=StepRecord(run.id, index=2),
                            in_context=[first, third])
    await store.flush()

    assert ok_1.exception() is None and ok_2.exception() is None
    assert isinstance(bad.exception(), StoreError)
    assert "duplicate message id" in str(bad.exception())
    assert _stored_ids(store.path) == [first.id, third.id]  # nothing of the failed step
    assert (await store.get_run(run.id)).step_count == 2
    assert (await store.get_agent(agent_id)).in_context_message_ids == [first.id, third.id]


async def test_a_write_after_queued_steps_commits_them_first_even_when_it_fails(
        store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    hello = user("hello")
    queued = store.queue_step(agent_id, [hello])
    with pytest.raises(StoreError):
        await store.append_step("agent-missing", [user("orphan")])
    assert queued.exception() is None and _stored_ids(store.path) == [hello.id]

    again = user("again")
    queued = store.queue_step(agent_id, [again])
    with pytest.raises(NotFoundError):  # a write that shares the queued steps' transaction
        await store.create_run("agent-missing")
    assert queued.exception() is None and _stored_ids(store.path) == [hello.id, again.id]


async def test_a_run_that_never_yields_commits_each_step_before_the_next(
        tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    seen: list[int] = []

    @tool
    async def count() -> str:
        """Look at what is committed (never yields to the event loop)."""
        seen.append(len(_stored_ids(str(path))))
        return "ok"

    steps = 100
    agent = Agent(model=ScriptedModel([call("count")] * steps + [reply("done")]),
                  tools=[count], store=f"sqlite:///{path}", name="busy", max_steps=steps + 1)
    result = await agent.run("go")
    assert result.steps == steps + 1
    # While step k runs, the system prompt, the input and steps 1..k-1 (two messages each)
    # are committed: a crash would lose only the step in flight (DESIGN invariant 3).
    assert seen == [1] + [2 * k for k in range(2, steps + 1)]
    assert len(_stored_ids(str(path))) == 2 + 2 * steps + 1  # system, input, steps, reply


async def test_a_checkpoint_that_cannot_land_fails_the_run(tmp_path: Path) -> None:
    path = tmp_path / "gone.db"

    @tool
    async def vanish() -> str:
        """Delete this agent behind the runtime's back, from another connection."""
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("DELETE FROM agents")
        return "gone"

    agent = Agent(model=ScriptedModel([call("vanish"), reply("done")]), tools=[vanish],
                  store=f"sqlite:///{path}", name="gone")
    with pytest.raises(StoreError, match=r"append_step .* refused: FOREIGN KEY"):
        await agent.run("go")


async def test_a_runs_messages_are_found_by_any_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    agent = Agent(model=ScriptedModel([call("count"), reply("one"), reply("two")]),
                  tools=[_count_tool()],
                  store=url, name="runner")
    first = await agent.run("one")
    agent.reset()  # a recompiled system prompt is stored with the next run, not as its message
    second = await agent.run("again")
    other = await open_store(url)  # as another process would
    try:
        runs = {run.id: run for run in await other.list_runs(agent.id)}
        assert [m.text for m in await other.list_run_messages(runs[second.run_id])] == [
            "again", "two"]
        added = await other.list_run_messages(runs[first.run_id])
        assert [m.role for m in added] == ["user", "assistant", "tool", "assistant"]
        assert [m.id for m in added] == [m.id for m in first.messages]
    finally:
        await other.close()


def _count_tool() -> object:
    @tool
    async def count() -> str:
        """Count."""
        return "1"

    return count
