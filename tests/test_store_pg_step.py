"""The step path on PostgreSQL: a step's checkpoint is one round trip, its blocks are read again
only when something changed them, and a change made through another store (another process)
is seen at the agent's next step."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from stateloop import Agent, Block, tool
from stateloop.messages import user
from stateloop.store import NotFoundError, open_store
from stateloop.store.records import APPEND, AgentRecord, RunRecord
from stateloop.store.sql import SqlStore
from stateloop.testing import ScriptedModel, call, reply

Factory = Callable[..., str]


@pytest.fixture
async def url(pg_database: Factory) -> AsyncIterator[str]:
    yield pg_database()


def _writer(store: SqlStore) -> Any:
    return store._runner._writer_conn().connection.dbapi_connection  # type: ignore[attr-defined]


@contextmanager
def round_trips(store: SqlStore) -> Iterator[list[int]]:
    """How many times the store's writer waited for the server inside the block (counted
    from libpq's protocol trace: each turn from sending to receiving is one round trip)."""
    import psycopg

    pgconn = _writer(store).pgconn
    counted: list[int] = []
    with tempfile.TemporaryFile() as log:
        pgconn.trace(log.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counted
        finally:
            pgconn.untrace()  # flushes the trace
            log.seek(0)
            directions = [line[:1] for line in log.read().splitlines() if line[:1] in b"FB"]
            counted.append(sum(1 for sent, got in itertools.pairwise(directions)
                               if (sent, got) == (b"F", b"B")))


class _Reads:
    """Counts the store's read transactions (block reads among them)."""

    def __init__(self, store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        runner = store._runner
        read = runner.read

        async def counted(fn: Any) -> Any:
            self.count += 1
            return await read(fn)

        monkeypatch.setattr(runner, "read", counted)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _script(steps: int) -> list[Any]:
    return [call("add", a=i, b=1) for i in range(steps - 1)] + [reply("done")]


async def _run(agent: Agent, steps: int) -> None:
    agent.model = ScriptedModel(_script(steps))
    result = await agent.run("go")
    assert (result.steps, result.output) == (steps, "done")


async def test_each_further_step_costs_one_round_trip_and_no_read(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = Agent(model=ScriptedModel([]), tools=[add], system="You add.", store=url,
                  name="adder", blocks=[Block(label="human", value="likes sums")],
                  max_steps=40)
    assert agent.store is not None
    store = agent.store
    # What a step's commit read stays fresh for a second: a busy machine may take more than
    # the default's milliseconds from a commit to the next step.
    monkeypatch.setattr("stateloop.persistence.CROSS_PROCESS_LAG", 1.0)
    await _run(agent, 3)  # statements prepared, plans cached
    reads = _Reads(store, monkeypatch)
    measured = {}
    for steps in (5, 25):
        before = reads.count
        with round_trips(store) as trips:
            await _run(agent, steps)
        measured[steps] = (trips[0], reads.count - before)
    # What a run costs besides its steps (its start, its turn) is the same for both runs:
    # twenty more steps cost twenty more round trips, one commit each, and no read.
    assert measured[25][0] - measured[5][0] == 20
    assert measured[25][1] == measured[5][1]


async def test_a_failing_statement_in_the_pipeline_fails_only_its_step(url: str) -> None:
    store = await open_store(url)
    try:
        agent_id = (await store.create_agent(AgentRecord(name="a"))).id
        with round_trips(store) as trips:
            await store.append_step(agent_id, [user("one")], in_context_ids=APPEND)
        assert trips == [1]
        ghost = RunRecord(agent_id=agent_id, id="run-gone")
        ok = store.queue_step(agent_id, [user("two")])
        bad = store.queue_finish(ghost, "completed", "end_turn", None)
        await store.flush()
        assert ok.exception() is None
        assert isinstance(bad.exception(), NotFoundError)
        assert "run-gone" in str(bad.exception())
        assert [m.text for m in await store.list_messages(agent_id)] == ["one", "two"]
    finally:
        await store.close()


async def test_a_block_edited_through_another_store_is_seen_at_the_next_step(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("stateloop.persistence.CROSS_PROCESS_LAG", 1.0)  # no re-read by age
    elsewhere = await open_store(url)  # another process's store, as far as the agent knows
    try:
        prompts: list[str] = []
        renames = ["Bob", "Dee"]
        block = Block(label="human", value="name: Ann")

        @tool
        async def rename(name: str) -> str:
            """Rename the human, through the other store."""
            await elsewhere.update_block(block.id, value=f"name: {name}")
            return "renamed"

        def model(request: Any) -> Any:
            prompts.append(request.messages[0].text)
            return call("rename", name=renames.pop(0)) if len(prompts) % 2 else reply("ok")

        agent = Agent(model=ScriptedModel(model), tools=[rename], system="Hi.", store=url,
                      name="shared", blocks=[block])
        await agent.run("rename me")
        assert "name: Ann" in prompts[0] and "name: Bob" in prompts[1]

        # Made while the agent is idle: seen by its next run's first step.
        await elsewhere.update_block(block.id, value="name: Cy")
        await agent.run("again")
        assert "name: Cy" in prompts[2] and "name: Dee" in prompts[3]
        assert [b.value for b in agent.blocks] == ["name: Dee"]
    finally:
        await elsewhere.close()
