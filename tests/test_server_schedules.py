"""Scheduled messages through letta-client (``client.agents.schedule``): one-time and cron
schedules created, listed, retrieved and deleted; refused input named; due ones fired as
async sends on a clock the test moves, a recurring one advanced once per firing however
many of its times were missed."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from letta_client import ConflictError, Letta, NotFoundError, UnprocessableEntityError

from fake_script import Script
from stateloop.scheduler import Scheduler
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply
from test_server_support import Server, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

T0 = datetime(2031, 3, 4, 9, 0, tzinfo=UTC).timestamp()  # a Tuesday, on the hour


class Clock:
    """The scheduler's time, moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def served(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("schedules") / "stateloop.db"
    with Server(settings_for(fake, db, schedule_interval=0.05, schedules_per_agent=3)) as up:
        yield up


@pytest.fixture
def clock(served: Server) -> Clock:
    scheduler: Scheduler = served.server.config.app.state.runtime.scheduler
    scheduler.clock = moved = Clock()
    return moved


@pytest.fixture
def client(served: Server, script: Script) -> Letta:
    script.set()
    return Letta(base_url=served.url, api_key="unused", max_retries=0, timeout=30)


def until(check: Callable[[], Any], what: str, limit: float = 20.0) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def fired_runs(client: Letta, agent_id: str, schedule_id: str) -> list[Any]:
    return [run for run in client.runs.list(agent_id=agent_id, limit=100)
            if (run.metadata or {}).get("scheduled_message_id") == schedule_id]


def ms(seconds: float) -> float:
    return seconds * 1000


def test_schedules_are_created_listed_retrieved_and_deleted(client: Letta,
                                                             clock: Clock) -> None:
    agent = new_agent(client).id
    once = client.agents.schedule.create(
        agent, messages=[{"role": "user", "content": "daily summary, please"}],
        schedule={"type": "one-time", "scheduled_at": ms(T0 + 3600)}, max_steps=3,
        include_return_message_types=["assistant_message"])
    assert once.next_scheduled_at == "2031-03-04T10:00:00+00:00"
    cron = client.agents.schedule.create(
        agent, messages=[{"role": "user", "content": [{"type": "text", "text": "check in"}]}],
        schedule={"type": "recurring", "cron_expression": "30 9 * * 1-5"})
    assert cron.next_scheduled_at == "2031-03-04T09:30:00+00:00"

    got = client.agents.schedule.retrieve(once.id, agent_id=agent)
    assert (got.id, got.agent_id, got.next_scheduled_time) == (once.id, agent,
                                                               "2031-03-04T10:00:00+00:00")
    assert got.schedule.scheduled_at == ms(T0 + 3600)
    assert got.message.messages[0].content == "daily summary, please"
    assert (got.message.max_steps, got.message.include_return_message_types) == (
        3, ["assistant_message"])
    listed = client.agents.schedule.list(agent)
    assert [s.id for s in listed.scheduled_messages] == [once.id, cron.id]
    assert not listed.has_next_page
    assert listed.scheduled_messages[1].schedule.cron_expression == "30 9 * * 1-5"
    first = client.agents.schedule.list(agent, limit="1")
    assert [s.id for s in first.scheduled_messages] == [once.id] and first.has_next_page
    rest = client.agents.schedule.list(agent, after=once.id)
    assert [s.id for s in rest.scheduled_messages] == [cron.id]

    assert client.agents.schedule.delete(once.id, agent_id=agent).success is True
    with pytest.raises(NotFoundError):
        client.agents.schedule.retrieve(once.id, agent_id=agent)
    with pytest.raises(NotFoundError):
        client.agents.schedule.delete(once.id, agent_id=agent)
    client.agents.delete(agent)  # its schedules go with it
    with pytest.raises(NotFoundError):
        client.agents.schedule.list(agent)
    with pytest.raises(NotFoundError):
        client.agents.schedule.retrieve(cron.id, agent_id=agent)


@pytest.mark.parametrize(("schedule", "field"), [
    ({"type": "recurring", "cron_expression": "* * * * * *"}, "cron_expression"),
    ({"type": "recurring", "cron_expression": "61 * * * *"}, "cron_expression"),
    ({"type": "recurring", "cron_expression": "every day"}, "cron_expression"),
    ({"type": "one-time", "scheduled_at": 1_900_000_000}, "scheduled_at"),  # seconds
    ({"type": "one-time", "scheduled_at": 1e20}, "scheduled_at"),
])
def test_a_bad_schedule_is_a_422_naming_its_field(client: Letta, clock: Clock,
                                                  schedule: dict[str, Any],
                                                  field: str) -> None:
    agent = new_agent(client).id
    with pytest.raises(UnprocessableEntityError) as refused:
        client.agents.schedule.create(agent, messages=[{"role": "user", "content": "hi"}],
                                      schedule=schedule)  # type: ignore[arg-type]
    assert refused.value.body["detail"][0]["loc"] == ["body", "schedule", field]


def test_other_refusals_name_their_problem(client: Letta, clock: Clock) -> None:
    agent = new_agent(client).id
    hello = [{"role": "user", "content": "hi"}]
    later = {"type": "one-time", "scheduled_at": ms(T0 + 60)}
    with pytest.raises(UnprocessableEntityError):  # no messages
        client.agents.schedule.create(agent, messages=[], schedule=later)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        client.agents.schedule.create("agent-00000000-0000-4000-8000-000000000000",
                                      messages=hello, schedule=later)  # type: ignore[arg-type]
    with pytest.raises(Exception) as refused:
        client.agents.schedule.create(agent, messages=hello, schedule=later,  # type: ignore[arg-type]
                                      callback_url="file:///etc/passwd")
    assert refused.value.status_code in (400, 422)  # type: ignore[attr-defined]
    for _ in range(3):
        client.agents.schedule.create(agent, messages=hello, schedule=later)  # type: ignore[arg-type]
    with pytest.raises(ConflictError) as full:
        client.agents.schedule.create(agent, messages=hello, schedule=later)  # type: ignore[arg-type]
    assert "3 pending scheduled messages" in str(full.value)
    client.agents.delete(agent)  # its schedules go with it, and fire in no later test


def test_a_one_time_message_fires_once_when_its_time_comes(client: Letta, clock: Clock,
                                                            script: Script) -> None:
    agent = new_agent(client).id
    script.set(reply("Here is your summary."))
    made = client.agents.schedule.create(
        agent, messages=[{"role": "user", "content": "summarize my day"}],
        schedule={"type": "one-time", "scheduled_at": ms(T0 + 3600)})
    time.sleep(0.3)  # several looks of the scheduler: not yet due
    assert fired_runs(client, agent, made.id) == [] and script.requests == []
    clock.now = T0 + 3600
    [run] = until(lambda: fired_runs(client, agent, made.id), "the message fires")
    until(lambda: client.runs.retrieve(run.id).status == "completed", "its run completes")
    time.sleep(0.3)
    assert len(fired_runs(client, agent, made.id)) == 1
    assert [m.text for m in script.requests[0].messages if m.role == "user"] == [
        "summarize my day"]
    done = client.agents.schedule.retrieve(made.id, agent_id=agent)
    assert done.next_scheduled_time is None
    assert done.model_extra is not None and done.model_extra["last_run_id"] == run.id
    assert run.metadata["scheduled_for"] == "2031-03-04T10:00:00+00:00"


def test_a_recurring_message_fires_once_per_due_time_however_many_were_missed(
        client: Letta, clock: Clock, script: Script) -> None:
    agent = new_agent(client).id
    script.set(*[reply(f"check-in {n}") for n in range(3)])
    made = client.agents.schedule.create(
        agent, messages=[{"role": "user", "content": "check in"}],
        schedule={"type": "recurring", "cron_expression": "*/5 * * * *"})
    assert made.next_scheduled_at == "2031-03-04T09:05:00+00:00"

    def next_time() -> str | None:
        return client.agents.schedule.retrieve(made.id, agent_id=agent).next_scheduled_time

    clock.now = T0 + 300
    until(lambda: next_time() == "2031-03-04T09:10:00+00:00", "the first firing advances it")
    until(lambda: len(fired_runs(client, agent, made.id)) == 1, "the first run")
    clock.now = T0 + 7200 + 1  # two hours later: 23 times missed
    until(lambda: next_time() == "2031-03-04T11:05:00+00:00", "the second firing advances it")
    time.sleep(0.3)
    runs = until(lambda: len(fired_runs(client, agent, made.id)) == 2
                 and fired_runs(client, agent, made.id), "the second run")
    until(lambda: all(client.runs.retrieve(r.id).status == "completed" for r in runs),
          "both runs complete")
    assert len(script.requests) == 2
    assert sorted(r.metadata["scheduled_for"] for r in runs) == [
        "2031-03-04T09:05:00+00:00", "2031-03-04T09:10:00+00:00"]


def test_a_time_already_past_fires_at_once(client: Letta, clock: Clock, script: Script) -> None:
    agent = new_agent(client).id
    script.set(reply("late, but here"))
    made = client.agents.schedule.create(
        agent, messages=[{"role": "user", "content": "were you asleep?"}],
        schedule={"type": "one-time", "scheduled_at": ms(T0 - 3600)})
    assert made.next_scheduled_at == "2031-03-04T08:00:00+00:00"
    [run] = until(lambda: fired_runs(client, agent, made.id), "the message fires")
    until(lambda: client.runs.retrieve(run.id).status == "completed", "its run completes")
    assert client.agents.schedule.retrieve(made.id, agent_id=agent).next_scheduled_time is None
