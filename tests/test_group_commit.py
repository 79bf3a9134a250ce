"""Queued step checkpoints: when they land, that they land whole, and that failures stay
with the step that failed."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conftest import DIALECTS, database_url, raw_sql
from killed_child import kill_when_hanging
from stateloop import Agent, tool
from stateloop.messages import Message, Usage, assistant, user
from stateloop.store import (
    AgentRecord,
    NotFoundError,
    StepRecord,
    StoreError,
    open_store,
)
from stateloop.store.records import APPEND
from stateloop.store.sql import SqlStore
from stateloop.testing import ScriptedModel, assert_transcript_valid, call, reply
from store_trace import traced


def _stored_ids(where: str | SqlStore) -> list[str]:
    """What another connection (another process, say) sees committed."""
    if isinstance(where, SqlStore):
        return [row[0] for row in raw_sql(where, "SELECT id FROM messages ORDER BY seq")]
    with sqlite3.connect(where) as db:
        return [row[0] for row in db.execute("SELECT id FROM messages ORDER BY seq")]


@pytest.fixture(params=DIALECTS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await open_store(database_url(request.param, tmp_path, request))
    yield s
    await s.close()


def _sqlite_runner_only(store: SqlStore) -> None:
    if store.path is None:
        pytest.skip("commits at the loop's next turn, traced by sqlite3: the inline runner's")


async def test_a_queued_step_lands_at_the_next_turn_of_the_event_loop(store: SqlStore) -> None:
    _sqlite_runner_only(store)
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    hello = user("hello")
    queued = store.queue_step(agent_id, [hello], in_context=[hello])
    assert not queued.done() and _stored_ids(store) == []
    await asyncio.sleep(0)
    assert queued.done() and queued.exception() is None
    assert _stored_ids(store) == [hello.id]
    assert (await store.get_agent(agent_id)).in_context_message_ids == [hello.id]


async def test_steps_of_agents_queued_in_one_turn_share_a_transaction(store: SqlStore) -> None:
    _sqlite_runner_only(store)
    ids = [(await store.create_agent(AgentRecord(name=name))).id for name in "abc"]
    with traced(store) as statements:
        queued = [store.queue_step(agent_id, [user(f"from {agent_id}")], in_context=APPEND)
                  for agent_id in ids]
        await asyncio.sleep(0)
    assert all(q.done() and q.exception() is None for q in queued)
    assert statements.count("BEGIN IMMEDIATE") == statements.count("COMMIT") == 1
    assert len(_stored_ids(store)) == 3


async def test_a_run_that_never_yields_commits_each_step_before_the_next(
        tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    committed: list[int] = []

    @tool
    async def count() -> str:
        """Look at what another process would see now (never yields)."""
        committed.append(len(_stored_ids(str(path))))
        return "ok"

    steps = 6
    agent = Agent(model=ScriptedModel([call("count")] * steps + [reply("done")]),
                  tools=[count], store=f"sqlite:///{path}", name="busy", max_steps=steps + 1)
    result = await agent.run("go")
    assert result.steps == steps + 1
    # While step k runs, the system prompt, then the input with steps 1..k-1 (two messages
    # each) are committed: a crash would lose the step in flight only (DESIGN invariant 3).
    assert committed == [1] + [2 * k for k in range(2, steps + 1)]
    assert len(_stored_ids(str(path))) == 2 + 2 * steps + 1  # system, input, steps, reply


async def test_reads_see_steps_still_queued(store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    messages = [user("one"), assistant("two")]
    store.queue_step(agent_id, messages)
    assert [m.text for m in await store.list_messages(agent_id)] == ["one", "two"]


async def test_a_failing_step_in_a_group_fails_alone_with_its_agents_later_steps(
        store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    other_id = (await store.create_agent(AgentRecord(name="b"))).id
    run = await store.create_run(agent_id, status="running")
    first, second, third = user("first"), assistant("second"), user("third")
    elsewhere = user("elsewhere")
    duplicate = Message.from_dict(first.to_dict())
    ok_1 = store.queue_step(agent_id, [first], step=StepRecord(run.id), in_context=[first])
    bad = store.queue_step(agent_id, [second, duplicate], step=StepRecord(run.id, index=1),
                           in_context=[first, second])
    other = store.queue_step(other_id, [elsewhere], in_context=[elsewhere])
    after_bad = store.queue_step(agent_id, [third], step=StepRecord(run.id, index=2),
                                 in_context=[first, second, third])
    await store.flush()

    assert ok_1.exception() is None and other.exception() is None
    assert isinstance(bad.exception(), StoreError)
    assert "duplicate message id" in str(bad.exception())
    # The agent's later step builds on the failed one: it fails with it, for the same reason.
    assert after_bad.exception() is bad.exception()
    assert _stored_ids(store) == [first.id, elsewhere.id]  # nothing of the failed step
    assert (await store.get_run(run.id)).step_count == 1
    assert (await store.get_agent(agent_id)).in_context_message_ids == [first.id]
    assert (await store.get_agent(other_id)).in_context_message_ids == [elsewhere.id]


async def test_a_write_after_queued_steps_commits_them_first_even_when_it_fails(
        store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    hello = user("hello")
    queued = store.queue_step(agent_id, [hello])
    with pytest.raises(StoreError):
        await store.append_step("agent-missing", [user("orphan")])
    assert queued.exception() is None and _stored_ids(store) == [hello.id]

    again = user("again")
    queued = store.queue_step(agent_id, [again])
    with pytest.raises(NotFoundError):  # a write that shares the queued steps' transaction
        await store.create_run("agent-missing")
    assert queued.exception() is None and _stored_ids(store) == [hello.id, again.id]


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
    result = await agent.run("go")
    assert result.stop_reason == "error"
    assert result.error is not None
    assert re.match(r"the step could not be stored: .*append_step .* refused: FOREIGN KEY",
                    result.error)


async def test_a_runs_messages_are_found_by_any_process(db_url: str) -> None:
    url = db_url
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


def test_the_steps_before_the_one_in_flight_survive_a_killed_process(tmp_path: Path) -> None:
    path, marker = tmp_path / "killed.db", tmp_path / "hanging"
    kill_when_hanging(f"""
        import time
        from pathlib import Path
        from stateloop import Agent, tool
        from stateloop.testing import ScriptedModel, call, reply

        @tool
        async def add(a: int, b: int) -> int:
            '''Add (never yields to the event loop).'''
            return a + b

        @tool
        async def hang() -> str:
            '''Blocks the event loop until the process is killed.'''
            Path({str(marker)!r}).write_text("started")
            time.sleep(600)
            return "unreachable"

        script = [call("add", a=i, b=1) for i in range(3)] + [call("hang"), reply("x")]
        agent = Agent(model=ScriptedModel(script), tools=[add, hang],
                      store="sqlite:///{path}", name="killed")
        agent.run_sync("go")
    """, marker)  # the event loop never turned: each step committed before the next began

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @tool
    def hang() -> str:
        """Fine now."""
        return "done"

    agent = Agent.load("killed", store=f"sqlite:///{path}", model=ScriptedModel([]),
                       tools=[add, hang])
    assert_transcript_valid(agent.messages)
    # The three completed steps are there; the step in flight was lost.
    assert [m.role for m in agent.messages] == ["system", "user"] + ["assistant", "tool"] * 3

    async def runs() -> list[tuple[str, int]]:
        store = agent.store
        assert store is not None
        return [(r.status, r.step_count) for r in await store.list_runs(agent.id)]

    assert asyncio.run(runs()) == [("failed", 3)]


async def _one_run(store: SqlStore, agent_id: str, *, commit_each: bool) -> str:
    run, _ = store.queue_run(agent_id)
    for index in range(3):
        if commit_each:
            await store.flush()
        store.queue_step(agent_id, [user(f"step {index}")], run_id=run.id,
                         step=StepRecord(run.id, index=index, usage=Usage(10 + index, 2, 1)))
    store.queue_finish(run, "completed", "end_turn", None)
    await store.flush()
    return run.id


async def test_a_run_in_one_transaction_has_its_row_written_once(store: SqlStore) -> None:
    _sqlite_runner_only(store)
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    stepwise = await store.get_run(await _one_run(store, agent_id, commit_each=True))

    with traced(store) as statements:
        run = await store.get_run(await _one_run(store, agent_id, commit_each=False))

    assert [s.split()[0] for s in statements if " runs " in f"{s} "] == ["INSERT"]
    assert (run.status, run.stop_reason, run.step_count, run.usage) == (
        "completed", "end_turn", 3, Usage(33, 6, 3))
    assert (stepwise.status, stepwise.stop_reason, stepwise.step_count, stepwise.usage) == (
        run.status, run.stop_reason, run.step_count, run.usage)
    assert run.completed_at is not None and run.completed_at >= run.created_at
    assert [m.text for m in await store.list_run_messages(run)] == [
        "step 0", "step 1", "step 2"]
    agent = await store.get_agent(agent_id)
    assert (agent.last_stop_reason, agent.last_run_completion) == ("end_turn", run.completed_at)


async def test_a_batch_larger_than_one_statement_keeps_order_and_contexts(
        store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    first = [user(f"a{i}") for i in range(100)]  # more rows than one insert statement takes
    second, aside, last = [user("b1"), user("b2")], assistant("aside"), [user("c")]
    store.queue_step(agent_id, first, in_context=first)
    store.queue_step(agent_id, second, in_context=APPEND)
    store.queue_step(agent_id, [aside])  # stored, not in context
    store.queue_step(agent_id, last, in_context=APPEND)
    await store.flush()

    assert _stored_ids(store) == [m.id for m in [*first, *second, aside, *last]]
    context = (await store.get_agent(agent_id)).in_context_message_ids
    assert context == [m.id for m in [*first, *second, *last]]


async def test_on_the_async_runner_a_step_after_a_failed_one_fails_with_it(
        tmp_path: Path) -> None:
    store = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'async.db'}")
    try:
        agent_id = (await store.create_agent(AgentRecord(name="a"))).id
        first, second, third = user("first"), assistant("second"), user("third")
        duplicate = Message.from_dict(first.to_dict())
        ok = store.queue_step(agent_id, [first], in_context=[first])
        bad = store.queue_step(agent_id, [second, duplicate], in_context=[first, second])
        after_bad = store.queue_step(agent_id, [third], in_context=[first, second, third])
        await store.flush()
        assert ok.exception() is None and isinstance(bad.exception(), StoreError)
        assert after_bad.exception() is bad.exception()
        assert (await store.get_agent(agent_id)).in_context_message_ids == [first.id]
    finally:
        await store.close()
