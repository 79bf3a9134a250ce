"""``GET /metrics``: scraped before and after real runs on a server with a password, the
counters moved by what the runs did; the path needs credentials unless the operator opens
it, and opening it opens nothing else."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from letta_client import Letta
from prometheus_client.parser import text_string_to_metric_families

from fake_script import Script
from stateloop.hooks import StepRecord, StepTiming
from stateloop.messages import ToolCall, assistant, tool_result
from stateloop.server.metrics import LABEL_VALUES, OTHER, ServerMetrics
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, calls, reply
from test_server_support import Server, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

PASSWORD = "metrics-test-password"
SHOUT = '''
def shout(text: str) -> str:
    """Repeat the text in capitals.

    Args:
        text: What to repeat.
    """
    return text.upper()
'''
BOOM = '''
def boom(text: str) -> str:
    """Fail, always.

    Args:
        text: Ignored.
    """
    raise ValueError("boom")
'''


@pytest.fixture(scope="module")
def guarded(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("metrics") / "stateloop.db"
    with Server(settings_for(fake, db, server_password=PASSWORD)) as running:
        yield running


def scrape(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``, by name and labels."""
    response = httpx.get(f"{server.url}/metrics",
                         headers={"Authorization": f"Bearer {PASSWORD}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text)
            for sample in family.samples}


def moved(before: dict[tuple[str, tuple[tuple[str, str], ...]], float],
          after: dict[tuple[str, tuple[tuple[str, str], ...]], float],
          name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_a_scrape_after_runs_shows_what_they_did(guarded: Server, script: Script) -> None:
    client = Letta(base_url=guarded.url, api_key=PASSWORD, max_retries=0, timeout=60)
    client.tools.upsert(source_code=SHOUT)
    client.tools.upsert(source_code=BOOM)
    agent = new_agent(client, tools=["shout", "boom"])
    before = scrape(guarded)
    script.set(calls(call("shout", text="a"), call("boom", text="b")),
               call("shout", text="c"), reply("Done."))
    assert client.agents.messages.create(agent.id, input="go").stop_reason.stop_reason == \
        "end_turn"
    script.set(reply("Again."))
    client.agents.messages.create(agent.id, input="again")
    after = scrape(guarded)

    assert moved(before, after, "stateloop_runs_total", stop_reason="end_turn") == 2
    assert moved(before, after, "stateloop_steps_total") == 4
    [model] = {dict(labels)["model"] for name, labels in after
               if name == "stateloop_model_calls_total"}
    assert moved(before, after, "stateloop_model_calls_total", model=model) == 4
    assert moved(before, after, "stateloop_model_call_seconds_count", model=model) == 4
    assert moved(before, after, "stateloop_model_call_seconds_sum", model=model) > 0
    assert moved(before, after, "stateloop_time_to_first_token_seconds_count",
                 model=model) == 4
    assert moved(before, after, "stateloop_model_tokens_total", model=model,
                 direction="input") > 0
    assert moved(before, after, "stateloop_model_tokens_total", model=model,
                 direction="output") > 0
    assert moved(before, after, "stateloop_tool_calls_total", tool="shout") == 2
    assert moved(before, after, "stateloop_tool_calls_total", tool="boom") == 1
    assert moved(before, after, "stateloop_tool_call_seconds_count", tool="shout") == 2
    assert moved(before, after, "stateloop_tool_call_seconds_sum", tool="shout") > 0
    assert moved(before, after, "stateloop_tool_errors_total", tool="boom") == 1
    assert moved(before, after, "stateloop_tool_errors_total", tool="shout") == 0


def test_metrics_need_credentials(guarded: Server) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = httpx.get(f"{guarded.url}/metrics", headers=headers)
        assert response.status_code == 401 and "credentials" in response.text


def test_the_operator_opens_metrics_and_nothing_else(fake: FakeOpenAI, tmp_path: Path) -> None:
    settings = settings_for(fake, tmp_path / "open.db", server_password=PASSWORD,
                            metrics_open=True)
    with Server(settings) as server:
        response = httpx.get(f"{server.url}/metrics")
        assert response.status_code == 200 and "stateloop_runs_total" in response.text
        assert httpx.get(f"{server.url}/v1/agents/").status_code == 401
        assert httpx.get(f"{server.url}/metrics/../v1/agents/").status_code == 401


def test_made_up_tool_names_and_models_do_not_grow_the_metrics() -> None:
    """Tool names come from what a model calls and models from what clients name: past
    LABEL_VALUES distinct values each, the rest are counted under ``other``."""
    served = ServerMetrics()
    extra = 50
    for n in range(LABEL_VALUES + extra):
        call = ToolCall(f"call-{n}", f"made_up_{n}", {})
        record = StepRecord("run-1", 1, [assistant(tool_calls=[call]),
                                         tool_result(call, "no such tool", is_error=True)],
                            model=f"openai/model-{n}",
                            timing=StepTiming(0, 1000, 500, 10, {call.id: (0, 10)}))
        served.watch("run-1", "agent-1", "openai/gpt-4o-mini").step(record)
    samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in text_string_to_metric_families(served.exposition().decode())
               for sample in family.samples}
    tools = {dict(labels)["tool"] for name, labels in samples
             if name == "stateloop_tool_calls_total"}
    models = {dict(labels)["model"] for name, labels in samples
              if name == "stateloop_model_calls_total"}
    assert len(tools) == len(models) == LABEL_VALUES + 1
    assert samples[("stateloop_tool_calls_total", (("tool", OTHER),))] == extra
    assert samples[("stateloop_tool_errors_total", (("tool", OTHER),))] == extra
    assert samples[("stateloop_model_calls_total", (("model", OTHER),))] == extra
    assert samples[("stateloop_tool_calls_total", (("tool", "made_up_0"),))] == 1


NAP = '''
def nap(seconds: float) -> str:
    """Sleep, then say so.

    Args:
        seconds: How long to sleep.
    """
    import time
    time.sleep(seconds)
    return "rested"
'''


def test_sandbox_workers_and_store_commits_are_measured(guarded: Server,
                                                        script: Script) -> None:
    client = Letta(base_url=guarded.url, api_key=PASSWORD, max_retries=0, timeout=60)
    client.tools.upsert(source_code=NAP)
    agent = new_agent(client, tools=["nap"])
    before = scrape(guarded)
    script.set(call("nap", seconds=1.0), reply("Rested."))
    with ThreadPoolExecutor(1) as pool:
        sent = pool.submit(client.agents.messages.create, agent.id, input="nap")
        deadline = time.monotonic() + 15
        while scrape(guarded).get(("stateloop_sandbox_workers", (("state", "busy"),))) != 1:
            assert time.monotonic() < deadline, "no busy sandbox worker seen"
            time.sleep(0.05)
        assert sent.result().stop_reason.stop_reason == "end_turn"
    after = scrape(guarded)
    assert after[("stateloop_sandbox_workers", (("state", "busy"),))] == 0
    assert after[("stateloop_sandbox_workers", (("state", "idle"),))] >= 1  # kept warm
    assert moved(before, after, "stateloop_store_commit_seconds_count") >= 1
    assert moved(before, after, "stateloop_store_commit_seconds_sum") > 0
    assert moved(before, after, "stateloop_store_committed_writes_total") >= 2  # two steps
