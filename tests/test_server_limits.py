"""Limits through letta-client, each configured for its test (all are off by default): a
credential over its requests a second, over its runs at once, a project over its model
tokens a day; each a 429 with Retry-After that names the limit, other credentials unhurt;
and an admin reads each project's usage. Runs started in the background count and are
refused too: a message batch's requests fail naming the limit, a scheduled message does
not fire."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.scheduler import Scheduler
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply
from test_server_support import Server, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

PASSWORD = "limits-password"


def limited(fake: FakeOpenAI, tmp_path: Path, **limits: Any) -> Server:
    return Server(settings_for(fake, tmp_path / "stateloop.db", server_password=PASSWORD,
                               **limits))


def key(server: Server, name: str, **body: Any) -> str:
    made = httpx.post(f"{server.url}/v1/api-keys", json={"name": name, **body}, timeout=30,
                      headers={"Authorization": f"Bearer {PASSWORD}"})
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def test_requests_a_second_per_credential(fake: FakeOpenAI, tmp_path: Path) -> None:
    with limited(fake, tmp_path, rate_limit=2) as server:
        first, second = key(server, "first"), key(server, "second")
        with httpx.Client(base_url=server.url, timeout=30) as http:
            answers = [http.get("/v1/agents", headers={"Authorization": f"Bearer {first}"})
                       for _ in range(4)]
            statuses = [a.status_code for a in answers]
            assert statuses[:2] == [200, 200] and 429 in statuses, statuses
            refused = next(a for a in answers if a.status_code == 429)
            assert int(refused.headers["retry-after"]) >= 1
            assert "STATELOOP_RATE_LIMIT" in refused.json()["detail"]
            other = http.get("/v1/agents", headers={"Authorization": f"Bearer {second}"})
            assert other.status_code == 200
            time.sleep(1.1)
            again = http.get("/v1/agents", headers={"Authorization": f"Bearer {first}"})
            assert again.status_code == 200


def test_runs_at_once_per_credential(fake: FakeOpenAI, script: Script, tmp_path: Path) -> None:
    release, started = threading.Event(), threading.Event()

    def held(request: Any) -> Any:
        started.set()
        release.wait(30)
        return reply("done at last")

    with limited(fake, tmp_path, concurrent_runs=1) as server:
        one = Letta(base_url=server.url, api_key=key(server, "one"), max_retries=0, timeout=60)
        two = Letta(base_url=server.url, api_key=key(server, "two"), max_retries=0, timeout=60)
        agent, spare = new_agent(one), new_agent(one)
        script.set(held, reply("second credential"))
        sending = threading.Thread(target=one.agents.messages.create, args=(agent.id,),
                                   kwargs={"messages": [{"role": "user", "content": "hi"}]})
        sending.start()
        try:
            assert started.wait(30)
            with pytest.raises(letta_client.RateLimitError, match="CONCURRENT_RUNS"):
                one.agents.messages.create(spare.id, messages=[{"role": "user", "content": "x"}])
            answered = two.agents.messages.create(spare.id,
                                                  messages=[{"role": "user", "content": "y"}])
            assert answered.messages
        finally:
            release.set()
            sending.join(30)
        script.set(reply("free again"))
        assert one.agents.messages.create(spare.id, messages=[
            {"role": "user", "content": "z"}]).messages


def test_model_tokens_a_day_per_project(fake: FakeOpenAI, script: Script,
                                        tmp_path: Path) -> None:
    with limited(fake, tmp_path, daily_tokens=1) as server:
        admin = Letta(base_url=server.url, api_key=PASSWORD, max_retries=0, timeout=30)
        agent = new_agent(admin)
        script.set(reply("the first is allowed"))
        admin.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hi"}])
        usage: Any = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not usage:  # added as the run ends
            usage = admin.get("/v1/usage", cast_to=object)
            time.sleep(0.05)
        [today] = usage
        assert today["project"] == "default" and today["tokens"] > 0 and today["runs"] == 1
        with pytest.raises(letta_client.RateLimitError, match="DAILY_TOKENS") as refused:
            admin.agents.messages.create(agent.id, messages=[{"role": "user", "content": "x"}])
        wait = int(refused.value.response.headers["retry-after"])
        assert 0 < wait <= 86400
        assert admin.agents.retrieve(agent.id).id == agent.id  # reads go on


def until(check: Callable[[], Any], what: str, limit: float = 20.0) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def test_a_batch_counts_and_stops_once_its_project_is_over(fake: FakeOpenAI, script: Script,
                                                           tmp_path: Path) -> None:
    with limited(fake, tmp_path, daily_tokens=1, batch_concurrency=1) as server:
        admin = Letta(base_url=server.url, api_key=PASSWORD, max_retries=0, timeout=30)
        alpha = Letta(base_url=server.url, api_key=key(server, "alpha", project="alpha"),
                      max_retries=0, timeout=30)
        agents = [new_agent(alpha).id for _ in range(3)]
        script.set(reply("the first is allowed"), reply("the default project's"))
        batch: Any = alpha.post("/v1/messages/batches", cast_to=object, body={"requests": [
            {"agent_id": agent, "input": f"hello {n}"} for n, agent in enumerate(agents)]})
        done = until(lambda: (lambda b: b if b["status"] != "running" else None)(
            alpha.get(f"/v1/messages/batches/{batch['id']}", cast_to=object)),
            "the batch ends")
        first, *rest = done["metadata"]["requests"]
        assert first["status"] == "completed" and first["run_id"] is not None
        assert [(r["status"], r["run_id"]) for r in rest] == [("failed", None)] * 2
        for refused in rest:
            assert "STATELOOP_DAILY_TOKENS" in refused["error"], refused
            assert "'alpha'" in refused["error"], refused
        assert len(script.requests) == 1  # the others never reached the model
        [used] = admin.get("/v1/usage", cast_to=object)  # type: ignore[misc]
        assert used["project"] == "alpha" and used["tokens"] > 0 and used["runs"] == 1
        other = new_agent(admin)  # another project's runs go on
        assert admin.agents.messages.create(other.id, messages=[
            {"role": "user", "content": "still here"}]).messages


def test_a_scheduled_message_of_a_project_over_its_day_does_not_run(
        fake: FakeOpenAI, script: Script, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    with limited(fake, tmp_path, daily_tokens=1, schedule_interval=0.05) as server:
        scheduler: Scheduler = server.server.config.app.state.runtime.scheduler
        now = [time.time()]
        scheduler.clock = lambda: now[0]
        admin = Letta(base_url=server.url, api_key=PASSWORD, max_retries=0, timeout=30)
        agent = new_agent(admin).id
        script.set(reply("the day's tokens, spent"), reply("never sent"))
        admin.agents.messages.create(agent, messages=[{"role": "user", "content": "hi"}])
        until(lambda: admin.get("/v1/usage", cast_to=object), "the run is counted")
        made = admin.agents.schedule.create(
            agent, messages=[{"role": "user", "content": "check in"}],
            schedule={"type": "recurring", "cron_expression": "*/5 * * * *"})

        def next_time() -> str | None:
            return admin.agents.schedule.retrieve(made.id, agent_id=agent).next_scheduled_time

        due = next_time()
        caplog.set_level(logging.WARNING, logger="stateloop")
        now[0] += 600  # it is due
        scheduler.wake()
        until(lambda: next_time() not in (due, None), "the firing moves it to its next time")
        refused = until(lambda: [r.getMessage() for r in caplog.records
                                 if made.id in r.getMessage()], "the firing is refused")
        assert "did not start" in refused[0] and "STATELOOP_DAILY_TOKENS" in refused[0]
        time.sleep(0.3)
        runs = admin.runs.list(agent_id=agent, limit=100)
        assert [r for r in runs if (r.metadata or {}).get("scheduled_message_id")] == []
        assert len(script.requests) == 1
        kept = admin.agents.schedule.retrieve(made.id, agent_id=agent)
        assert kept.model_extra is not None and kept.model_extra["last_run_id"] is None
