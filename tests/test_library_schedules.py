"""Scheduled messages in the library (``stateloop.Schedules``) on SQLite, on a clock the test
moves: one-time and cron schedules fire as runs of their agent, once per due time however
many of a cron schedule's times were missed; a schedule added before a restart fires after
it; bad schedules are refused before anything is stored."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from stateloop import Agent, ConfigError, Schedules
from stateloop.store import RunRecord
from stateloop.testing import ScriptedModel, reply

T0 = datetime(2031, 3, 4, 9, 0, tzinfo=UTC).timestamp()  # a Tuesday, on the hour
DAY = 86400.0


class Clock:
    """The scheduler's time, moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


async def fired(schedules: Schedules, agent_id: str, schedule_id: str) -> list[RunRecord]:
    runs = await schedules.store.list_runs(agent_id)
    return [run for run in runs if run.metadata.get("scheduled_message_id") == schedule_id]


async def advance(schedules: Schedules, clock: Clock, to: float) -> None:
    clock.now = to
    await schedules.tick()
    await schedules.drain()


async def test_one_time_and_cron_schedules_fire_as_runs_once_per_due_time(
        tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'agents.db'}"
    model = ScriptedModel([reply("Here is the summary."), reply("Morning!")])
    agent = await Agent.acreate(model, store=db, name="scheduled")
    clock = Clock()
    async with Schedules(db, clock=clock, interval=3600) as schedules:
        once = await schedules.add(agent, "Summarize the day.",
                                   at=datetime(2031, 3, 4, 9, 30, tzinfo=UTC))
        daily = await schedules.add(agent, ["Good morning.", "Anything due?"],
                                    cron="0 10 * * *", max_steps=2)
        assert (once.next_at, daily.next_at) == (T0 + 1800, T0 + 3600)
        assert once.schedule == {"type": "one-time", "scheduled_at": (T0 + 1800) * 1000}

        await advance(schedules, clock, T0 + 1799)
        assert await schedules.store.list_runs(agent.id) == []
        await advance(schedules, clock, T0 + 1800)
        (run,) = await fired(schedules, agent.id, once.id)
        assert run.status == "completed"
        assert run.metadata["scheduled_for"] == "2031-03-04T09:30:00+00:00"
        assert [m.text for m in agent.messages[-2:]] == ["Summarize the day.",
                                                        "Here is the summary."]
        listed = {s.id: s for s in await schedules.for_agent(agent)}
        assert listed[once.id].next_at is None and listed[once.id].last_run_id == run.id

        # three days pass with nothing running: the daily message fires once, not three times
        late = T0 + 3 * DAY + 5 * 3600
        await advance(schedules, clock, late)
        await advance(schedules, clock, late + 60)
        (morning,) = await fired(schedules, agent.id, daily.id)
        assert [m.text for m in agent.messages[-3:]] == ["Good morning.", "Anything due?",
                                                        "Morning!"]
        assert (await schedules.for_agent(agent))[1].next_at == T0 + 4 * DAY + 3600
        assert len(model.requests) == 2
        assert morning.metadata["scheduled_for"] == "2031-03-04T10:00:00+00:00"  # the first missed

        assert await schedules.delete(agent, daily.id) is True
        assert await schedules.delete(agent, daily.id) is False
        assert [s.id for s in await schedules.for_agent(agent)] == [once.id]
        await advance(schedules, clock, late + 2 * DAY)
        assert len(model.requests) == 2


async def test_a_schedule_added_before_a_restart_fires_after_it(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'agents.db'}"
    agent = await Agent.acreate(ScriptedModel([]), store=db, name="patient")
    clock = Clock()
    async with Schedules(db, clock=clock, interval=3600) as schedules:
        later = await schedules.add(agent, "Still there?", at=T0 + 600)
    after = ScriptedModel([reply("Yes.")])

    async def load(agent_id: str) -> Agent:
        return await Agent.aload(agent_id, store=db, model=after)

    async with Schedules(db, clock=clock, interval=3600, load=load) as schedules:
        await advance(schedules, clock, T0 + 3600)
        (run,) = await fired(schedules, agent.id, later.id)
        assert run.status == "completed"
        assert [m.text for m in after.requests[0].messages[-1:]] == ["Still there?"]


async def test_bad_schedules_are_refused_before_anything_is_stored(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'agents.db'}"
    agent = await Agent.acreate(ScriptedModel([]), store=db, name="picky")
    elsewhere = await Agent.acreate(ScriptedModel([]), store=f"sqlite:///{tmp_path / 'b.db'}")
    unstored = Agent(ScriptedModel([]))
    async with Schedules(db, clock=Clock(), per_agent=2) as schedules:
        bad = [({"at": T0, "cron": "* * * * *"}, "one of"), ({}, "one of"),
               ({"cron": "* * * * * *"}, "five fields"), ({"cron": "61 * * * *"}, "valid"),
               ({"at": datetime(2031, 3, 4)}, "aware"), ({"at": T0 * 1000}, "seconds")]
        for when, problem in bad:
            with pytest.raises(ValueError, match=problem):
                await schedules.add(agent, "hi", **when)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="input"):
            await schedules.add(agent, [], at=T0)
        with pytest.raises(ValueError, match="max_steps"):
            await schedules.add(agent, "hi", at=T0, max_steps=0)
        for other in (elsewhere, unstored):
            with pytest.raises(ConfigError, match="not stored in this store"):
                await schedules.add(other, "hi", at=T0)
        assert await schedules.for_agent(agent) == []
        await schedules.add(agent, "one", at=T0 + 60)
        await schedules.add(agent, "two", cron="0 * * * *")
        with pytest.raises(ValueError, match="pending scheduled messages"):
            await schedules.add(agent, "three", at=T0 + 60)
        assert len(await schedules.for_agent(agent)) == 2
