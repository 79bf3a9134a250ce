"""Scheduled messages on a fleet: two ``stateloop serve`` processes on one PostgreSQL, 50
one-time messages due in the same second, one process SIGKILLed while they fire: each fires
exactly once (those the dead process had claimed but not run are fired by the other)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import math
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from letta_client import Letta

from patience import STOPS
from stateloop.testing.scripted import reply
from test_cli_support import Cli, Script, cli, console_script, fake, free_port, script  # noqa: F401 (fixtures)
from test_server_fleet import _healthy, new_agent, process, until

MESSAGES = 50


@contextmanager
def logged(cli: Cli, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``stateloop serve`` on ``port``, its output in ``log`` (read by no pipe, which a
    chatty server could fill), stopped on exit."""
    with log.open("wb") as out:
        child = subprocess.Popen([*console_script(), "serve", "--port", str(port)],
                                 env=cli.environment(), stdout=out, stderr=subprocess.STDOUT)
        try:
            until(lambda: _healthy(port), "the server comes up", timeout=30)
            yield child
        finally:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(STOPS)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                raise AssertionError(
                    f"the server did not stop:\n{log.read_text()[-3000:]}") from None


def fired(client: Letta) -> dict[str, list[str]]:
    """Run ids by the schedule that started them."""
    runs: dict[str, list[str]] = {}
    for run in client.runs.list(limit=1000):
        schedule = (run.metadata or {}).get("scheduled_message_id")
        if schedule is not None:
            runs.setdefault(schedule, []).append(run.id)
    return runs


def test_fifty_messages_due_at_once_fire_exactly_once_across_a_killed_process(
        cli: Cli, script: Script, pg_database: Callable[..., str], tmp_path: Path) -> None:
    cli.env["STATELOOP_DATABASE_URL"] = pg_database()
    cli.env["STATELOOP_SCHEDULE_INTERVAL"] = "0.1"
    script.set(*[reply("noted")] * MESSAGES)
    port = free_port()
    survivor_port = free_port()
    with logged(cli, survivor_port, tmp_path / "survivor.log"), process(cli, port) as doomed:
        two = Letta(base_url=f"http://127.0.0.1:{survivor_port}", api_key="x")
        agents = [new_agent(two) for _ in range(MESSAGES)]
        due = math.ceil(time.time()) + 3  # the same second for all
        made: dict[str, str] = {}
        for agent in agents:
            made[two.agents.schedule.create(
                agent, messages=[{"role": "user", "content": "tick"}],
                schedule={"type": "one-time", "scheduled_at": due * 1000}).id] = agent
        assert time.time() < due, "the schedules were made before they were due"
        until(lambda: len(fired(two)) >= 5, "the first messages fire", 30)
        doomed.kill()  # SIGKILL while the rest fire
        doomed.wait()

        def settled() -> Any:
            views = [two.agents.schedule.retrieve(s, agent_id=a) for s, a in made.items()]
            done = all(v.next_scheduled_time is None and v.model_extra
                       and v.model_extra["last_run_id"] for v in views)
            return done and views

        views = until(settled, "every message has fired", 60)
        time.sleep(2)  # nothing fires late
        runs = fired(two)
        statuses = [two.runs.retrieve(r[0]).status or "" for r in runs.values()]
    assert {s: len(r) for s, r in runs.items() if len(r) != 1} == {}
    assert set(runs) == set(made)
    assert {v.id: v.model_extra["last_run_id"] for v in views} == {  # type: ignore[index]
        s: r[0] for s, r in runs.items()}
    # the dead process's runs in flight end failed, the rest complete
    assert set(statuses) <= {"completed", "failed"}
    print(f"{statuses.count('completed')} completed, {statuses.count('failed')} failed")
