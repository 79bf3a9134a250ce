"""A message batch on a fleet: two ``stateloop serve`` processes on one PostgreSQL, the
batch's bound kept across both, and one process SIGKILLed with requests in flight: the
other ends those as their runs did (failed: the process running them died) and runs the
rest, each request once."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.llm.base import ModelRequest
from stateloop.server.services.batches import INTERRUPTED
from stateloop.store.fleet import INTERRUPTED as RUN_INTERRUPTED
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import ScriptItem, reply
from test_cli_support import Cli, cli, free_port, script, serving  # noqa: F401 (fixtures)
from test_server_fleet import new_agent, process, until

REQUESTS = 6


@pytest.fixture(scope="module")
def fake(script: Script) -> Iterator[FakeOpenAI]:
    """The fake model; while a test clears ``release``, each reply pauses after its first
    chunk (many may be in flight at once)."""
    with FakeOpenAI(script, hold_after=1) as server:
        server.release.set()
        yield server


def echo(request: ModelRequest) -> ScriptItem:
    return reply(f"re: {request.messages[-1].text}")


def batch_of(client: Letta, batch_id: str) -> Any:
    return client.get(f"/v1/messages/batches/{batch_id}", cast_to=object)


def test_a_batch_runs_each_request_once_within_its_bound_across_a_killed_process(
        cli: Cli, script: Script, fake: FakeOpenAI, pg_database: Callable[..., str]) -> None:
    cli.env["STATELOOP_DATABASE_URL"] = pg_database()
    cli.env["STATELOOP_BATCH_CONCURRENCY"] = "2"
    script.set(*[echo] * REQUESTS)
    port = free_port()
    with serving(cli) as survivor, process(cli, port) as doomed:
        alive = Letta(base_url=survivor, api_key="x", max_retries=0, timeout=30)
        dying = Letta(base_url=f"http://127.0.0.1:{port}", api_key="x", max_retries=0,
                      timeout=30)
        agents = [new_agent(alive) for _ in range(REQUESTS)]
        fake.release.clear()
        try:
            batch = dying.post("/v1/messages/batches", cast_to=object, body={"requests": [
                {"agent_id": a, "input": f"job {n}"} for n, a in enumerate(agents)]})
            until(lambda: len(script.requests) == 2, "two requests reach the model")
            time.sleep(2.5)  # each process looks at least twice: neither starts a third
            assert len(script.requests) == 2
            statuses = [r["status"] for r in batch_of(alive, batch["id"])["metadata"]["requests"]]
            assert sorted(statuses) == ["pending"] * 4 + ["running"] * 2
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
        finally:
            fake.release.set()
        done = until(lambda: (lambda b: b if b["status"] != "running" else None)(
            batch_of(alive, batch["id"])), "the survivor finishes the batch", timeout=60)
        runs = {a: [run.id for run in alive.runs.list(agent_id=a, limit=10)] for a in agents}
    assert all(len(found) == 1 for found in runs.values()), runs
    results = done["metadata"]["requests"]
    failed = [r for r in results if r["status"] == "failed"]
    # The process the batch was sent to claims its first two at once (the other looks a
    # moment later, and seldom first): those were in flight when it died. Each says so: in
    # the batch's words, or in its run's when the fleet's sweep failed the run first.
    assert len(failed) <= 2
    assert all(r["error"] in (INTERRUPTED, RUN_INTERRUPTED) for r in failed), failed
    assert len(failed) + sum(r["status"] == "completed" for r in results) == REQUESTS
    assert [[r["run_id"]] for r in results] == [runs[a] for a in agents]
    asked = sorted(r.messages[-1].text for r in script.requests)
    assert asked == sorted(f"job {n}" for n in range(REQUESTS))  # each once, none again
