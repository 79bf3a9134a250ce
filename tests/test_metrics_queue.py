"""``GET /metrics`` on runs that queue: a send that waits for its agent's run in flight is
timed in ``stateloop_run_queue_wait_seconds`` (one series, no agent label), and on
PostgreSQL each turn is counted in ``stateloop_fleet_turns_total``, by whether another
server's run went first (two servers on one database, driven by letta-client); a run whose
stream the client dropped is counted when it ends."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from letta_client import Letta
from prometheus_client.parser import text_string_to_metric_families

from fake_script import Script, held
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply
from test_server_support import Server, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

HELD_S = 1.0  # how long the first run stays in flight once the second was sent
# The second waits the hold less the time its request took to reach the server's queue,
# which on a loaded machine can be a good part of a second: at least this much is waited.
WAITED_S = HELD_S / 2

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(server: Server) -> Samples:
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def until(check: Callable[[], Any], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.02)


def _two_sends(first: Letta, second: Letta, agent_id: str, script: Script) -> None:
    """``first`` sends and its model call is held; ``second`` sends meanwhile and waits for
    the first run to end."""
    gate = threading.Event()
    script.set(held(gate, reply("first")), reply("second"))
    with ThreadPoolExecutor(2) as pool:
        try:
            one = pool.submit(first.agents.messages.create, agent_id, input="one")
            until(lambda: len(script.requests) == 1, "the first run calls the model")
            two = pool.submit(second.agents.messages.create, agent_id, input="two")
            time.sleep(HELD_S)
        finally:
            gate.set()
        assert one.result().messages[-1].content == "first"
        assert two.result().messages[-1].content == "second"


def test_a_send_behind_its_agent_s_run_is_timed_waiting(
        fake: FakeOpenAI, script: Script, tmp_path: Path) -> None:
    with Server(settings_for(fake, tmp_path / "queue.db")) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=60)
        agent = new_agent(client)
        before = scrape(server)
        _two_sends(client, client, agent.id, script)
        after = scrape(server)
    waits = {key: value for key, value in after.items()
             if key[0].startswith("stateloop_run_queue_wait_seconds")}
    assert all(set(dict(labels)) <= {"le"} for _, labels in waits)  # no agent label
    count = ("stateloop_run_queue_wait_seconds_count", ())
    total = ("stateloop_run_queue_wait_seconds_sum", ())
    assert after[count] - before.get(count, 0) == 2
    assert after[total] - before.get(total, 0) >= WAITED_S  # the second waited
    quick = ("stateloop_run_queue_wait_seconds_bucket", (("le", "0.1"),))
    assert after[quick] - before.get(quick, 0) == 1  # the first did not
    assert not any(key[0] == "stateloop_fleet_turns_total" for key in after)  # SQLite


def test_fleet_turns_count_who_waited_for_another_server(
        fake: FakeOpenAI, script: Script, tmp_path: Path,
        pg_database: Callable[..., str]) -> None:
    database = pg_database()
    settings = settings_for(fake, tmp_path / "unused.db", database_url=database)
    with Server(settings) as one, Server(settings) as two:
        first = Letta(base_url=one.url, api_key="unused", max_retries=0, timeout=60)
        second = Letta(base_url=two.url, api_key="unused", max_retries=0, timeout=60)
        agent = new_agent(first)
        _two_sends(first, second, agent.id, script)
        on_one, on_two = scrape(one), scrape(two)
    # Run watchers are the process's, so two servers in one process both count every run:
    # the run on the first went at once, the one on the second after it.
    turns = "stateloop_fleet_turns_total"
    for scraped in (on_one, on_two):
        assert scraped[(turns, (("waited", "false"),))] == 1
        assert scraped[(turns, (("waited", "true"),))] == 1
        assert scraped[("stateloop_run_queue_wait_seconds_sum", ())] >= WAITED_S


def test_a_run_whose_stream_the_client_dropped_is_still_counted(
        fake: FakeOpenAI, script: Script, tmp_path: Path) -> None:
    with Server(settings_for(fake, tmp_path / "dropped.db")) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=60)
        agent = new_agent(client)
        before = scrape(server)
        gate = threading.Event()
        script.set(held(gate, reply("nobody reads this")))
        try:
            with httpx.stream("POST", f"{server.url}/v1/agents/{agent.id}/messages/stream",
                              json={"input": "hello", "stream_tokens": True},
                              timeout=30) as response:
                assert response.status_code == 200
                until(lambda: len(script.requests) == 1, "the model is called")
            # the client has gone; the model answers after
        finally:
            gate.set()
        ended = ("stateloop_runs_total",)
        until(lambda: sum(value - before.get(key, 0) for key, value in scrape(server).items()
                          if key[0] == ended[0]) == 1, "the dropped run is counted")
        [run] = client.runs.list(agent_id=agent.id).items
        counted = {dict(key[1])["stop_reason"] for key, value in scrape(server).items()
                   if key[0] == ended[0] and value - before.get(key, 0) == 1}
        assert counted == {run.stop_reason}
