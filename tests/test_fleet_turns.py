"""Turns across processes sharing one PostgreSQL (store/fleet.py): each ``SqlStore`` below
stands for one process (its own connections, application name and listening connection).
The same agent loaded in two stores runs one run at a time, in arrival order, and each run
starts from what the other one stored; a dead store's turn is taken back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from conftest import raw_sql
from patience import ANSWERS
from stateloop import Agent, Block
from stateloop.errors import AgentBusyError
from stateloop.llm.base import ModelRequest, StreamItem
from stateloop.store import open_store
from stateloop.store.fleet import Fleet
from stateloop.store.sql import SqlStore
from stateloop.testing.scripted import ScriptedModel, ScriptItem, call, reply


def _saw(request: ModelRequest) -> ScriptItem:
    """What it saw: the user texts in its context, in order."""
    return reply("saw " + "|".join(m.text for m in request.messages if m.role == "user"))


def echo(latency: float = 0.0) -> ScriptedModel:
    """Answers each message with what it saw."""
    return ScriptedModel(_saw, latency=latency)


class HeldEcho(ScriptedModel):
    """``echo`` that answers only once ``gate`` is set (``called`` is set at the request):
    a run stays in flight for as long as the test needs, however slow the machine."""

    def __init__(self) -> None:
        super().__init__(_saw)
        self.called, self.gate = asyncio.Event(), asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.called.set()
        await asyncio.wait_for(self.gate.wait(), ANSWERS)
        async for item in super().stream(request):
            yield item


@pytest.fixture
async def stores(pg_database: Callable[..., str]) -> AsyncIterator[list[SqlStore]]:
    url = pg_database()
    opened = [await open_store(url) for _ in range(3)]
    for store in opened:  # listening, as a server process is from its start
        await fleet(store).start()
    yield opened
    for store in opened:
        await store.close()


async def newest_ticket(store: SqlStore) -> int:
    """The newest turn ticket now: every later one is numbered higher."""
    [(newest,)] = await asyncio.to_thread(
        raw_sql, store, "SELECT coalesce(max(ticket), 0) FROM fleet_tickets")
    return int(newest)


async def arrived(store: SqlStore, agent_id: str, after: int, run: asyncio.Task[Any]) -> None:
    """Until a ticket of this agent numbered after ``after`` is there (or ``run`` ended)."""
    deadline = asyncio.get_running_loop().time() + ANSWERS
    while not run.done() and not await asyncio.to_thread(
            raw_sql, store, "SELECT 1 FROM fleet_tickets WHERE agent_id = ? AND ticket > ?",
            (agent_id, after)):
        assert asyncio.get_running_loop().time() < deadline, "the run never took a ticket"
        await asyncio.sleep(0.01)


def fleet(store: SqlStore) -> Fleet:
    assert store.fleet is not None
    return store.fleet


async def twins(stores: list[SqlStore], latency: float = 0.0,
                first_model: ScriptedModel | None = None, **settings: Any
                ) -> tuple[Agent, Agent]:
    first = await Agent.acreate(first_model or echo(latency), store=stores[0], name="twin",
                                blocks=[Block(label="human", value="")], **settings)
    second = await Agent.aload(first.id, store=stores[1], model=echo(latency), **settings)
    return first, second


async def test_each_process_starts_from_what_the_other_stored(stores: list[SqlStore]) -> None:
    one, two = await twins(stores)
    assert (await one.run("a")).output == "saw a"
    assert (await two.run("b")).output == "saw a|b"  # read again: one ran it meanwhile
    assert (await one.run("c")).output == "saw a|b|c"
    texts = [m.text for m in await stores[2].list_messages(one.id) if m.role == "user"]
    assert texts == ["a", "b", "c"]


async def test_runs_in_two_processes_take_turns_in_arrival_order(
        stores: list[SqlStore]) -> None:
    one, two = await twins(stores, latency=0.1)
    runs = []
    for index in range(6):  # sent alternately to each process, each while others wait
        agent = (one, two)[index % 2]
        after = await newest_ticket(stores[2])
        runs.append(asyncio.create_task(agent.run(f"m{index}")))
        await arrived(stores[2], one.id, after, runs[-1])  # arrival order: as sent
    results = await asyncio.gather(*runs)
    sent = [f"m{index}" for index in range(6)]
    for index, result in enumerate(results):  # each saw exactly the sends before it
        assert result.output == "saw " + "|".join(sent[:index + 1])
    stored = await stores[2].list_messages(one.id)
    assert [m.role for m in stored[1:]] == ["user", "assistant"] * 6  # never interleaved


async def test_a_busy_agent_in_another_process_is_refused_when_asked(
        stores: list[SqlStore]) -> None:
    model = HeldEcho()
    one, two = await twins(stores, first_model=model, busy="reject")
    running = asyncio.create_task(one.run("slow"))
    await asyncio.wait_for(model.called.wait(), ANSWERS)  # its turn taken, its model called
    with pytest.raises(AgentBusyError, match="another process"):
        await two.run("too soon")
    model.gate.set()
    assert (await running).output == "saw slow"
    assert (await two.run("now")).output == "saw slow|now"


async def test_a_dead_processs_turn_is_taken_back_and_its_run_failed(
        stores: list[SqlStore], pg_database: Callable[..., str]) -> None:
    one, _ = await twins(stores)
    await one.run("first")
    dead = stores[1]
    turn = await fleet(dead).enter(one.id, None)
    await fleet(dead).wait(turn)
    run, _ = dead.queue_run(one.id)  # a run in flight there, stored
    await dead.flush()
    await dead.close()  # its connections go, as a killed process's do; its ticket stays
    result = await asyncio.wait_for(one.run("after"), 10)
    assert result.output == "saw first|after"
    assert (await stores[2].get_run(run.id)).status == "failed"


async def test_a_change_outside_a_run_reaches_the_other_processes(
        stores: list[SqlStore]) -> None:
    heard: list[dict[str, Any]] = []
    fleet(stores[1]).subscribe(heard.append)
    await fleet(stores[1]).start()
    await fleet(stores[0]).touch("agent-1")
    await fleet(stores[0]).send({"op": "cancel", "agent_id": "agent-1"})
    for _ in range(100):
        if len(heard) == 2:
            break
        await asyncio.sleep(0.01)
    assert [(m["op"], m["agent_id"]) for m in heard] == [("changed", "agent-1"),
                                                          ("cancel", "agent-1")]
    with pytest.raises(ValueError, match="at most"):
        await fleet(stores[0]).send({"op": "steer", "text": "x" * 9000})


async def test_turns_counted_in_either_process_start_the_memory_agent_on_time(
        stores: list[SqlStore]) -> None:
    one = await Agent.acreate(echo(), store=stores[0], name="sleepy",
                              blocks=[Block(label="human", value="")], enable_sleeptime=True,
                              sleeptime_agent_frequency=2)
    two = await Agent.aload(one.id, store=stores[1], model=echo())
    assert one.sleeptime is not None and two.sleeptime is not None
    memory_model = ScriptedModel([call("memory_finish_edits")])
    one.sleeptime.model = two.sleeptime.model = memory_model
    await one.run("first")
    await one.sleeptime.wait()  # the counter is stored in the background
    await two.run("second")  # the second turn of two, counted with the first one's
    await two.sleeptime.wait()
    assert len(memory_model.requests) == 1
    assert "user: first" in memory_model.requests[0].messages[-1].text
