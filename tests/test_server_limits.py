"""Limits through letta-client, each configured for its test (all are off by default): a
credential over its requests a second, over its runs at once, a project over its model
tokens a day; each a 429 with Retry-After that names the limit, other credentials unhurt;
and an admin reads each project's usage."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply
from test_server_support import Server, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

PASSWORD = "limits-password"


def limited(fake: FakeOpenAI, tmp_path: Path, **limits: Any) -> Server:
    return Server(settings_for(fake, tmp_path / "stateloop.db", server_password=PASSWORD,
                               **limits))


def key(server: Server, name: str) -> str:
    made = httpx.post(f"{server.url}/v1/api-keys", json={"name": name}, timeout=30,
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
