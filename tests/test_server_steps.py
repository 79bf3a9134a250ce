"""Steps across runs (list, one step, its messages, metrics, feedback) and run housekeeping
(active runs, deletion, metrics), through letta-client where it has the method and plain
HTTP otherwise; every answer is checked against Letta's document."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import Script, held
from letta_spec import assert_letta_shape
from stateloop.testing.scripted import call, reply
from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

SHOUT = '''
def shout(text: str) -> str:
    """Repeat the text in capitals.

    Args:
        text: What to repeat.
    """
    return text.upper()
'''
MISSING_STEP = "step-00000000-0000-4000-8000-000000000000"


@pytest.fixture(scope="module")
def shout_tool(server: Server) -> Any:
    return Letta(base_url=server.url, api_key="x").tools.upsert(source_code=SHOUT)


def _two_step_run(client: Letta, script: Script) -> tuple[Any, Any]:
    """An agent and its finished run: a call of ``shout``, then an answer."""
    agent = new_agent(client, tools=["shout"])
    script.set(call("shout", text="hi"), reply("It said HI."))
    response = client.agents.messages.create(agent.id, input="Shout hi")
    assert response.stop_reason.stop_reason == "end_turn"
    [run] = client.runs.list(agent_id=agent.id).items
    return agent, run


def _json(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def test_steps_are_listed_across_runs_with_lettas_filters(
        server: Server, client: Letta, script: Script, shout_tool: Any) -> None:
    agent, run = _two_step_run(client, script)
    other, _ = _two_step_run(client, script)
    steps = client.steps.list(agent_id=agent.id).items
    assert [s.run_id for s in steps] == [run.id, run.id]
    assert steps == list(reversed(client.steps.list(agent_id=agent.id, order="asc").items))
    assert [s.id for s in client.runs.steps.list(run.id)] == [s.id for s in reversed(steps)]
    everyone = {s.agent_id for s in client.steps.list(limit=1000).items}
    assert {agent.id, other.id} <= everyone
    page = client.steps.list(agent_id=agent.id, after=steps[0].id, limit=5).items
    assert [s.id for s in page] == [steps[1].id]
    assert len(client.steps.list(agent_id=agent.id, model="gpt-4o-mini").items) == 2
    assert client.steps.list(agent_id=agent.id, model="gpt-5").items == []
    assert client.steps.list(agent_id=agent.id, start_date="2999-01-01").items == []
    assert len(client.steps.list(agent_id=agent.id, end_date="2999-01-01").items) == 2
    response = httpx.get(f"{server.url}/v1/steps/", params={"start_date": "soon"})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == [
        "query", "start_date"]
    assert_letta_shape("/v1/steps/", "get",
                       _json(httpx.get(f"{server.url}/v1/steps/",
                                       params={"agent_id": agent.id})))


def test_a_step_its_messages_and_metrics(server: Server, client: Letta, script: Script,
                                         shout_tool: Any) -> None:
    agent, run = _two_step_run(client, script)
    first, second = client.runs.steps.list(run.id).items
    step = client.steps.retrieve(first.id)
    assert (step.id, step.run_id, step.agent_id) == (first.id, run.id, agent.id)
    assert step.prompt_tokens == first.prompt_tokens and step.status == "success"
    calling = client.steps.messages.list(first.id).items
    assert [m.message_type for m in calling] == ["user_message", "tool_call_message",
                                                 "tool_return_message"]
    assert {m.step_id for m in calling} == {first.id}
    answering = client.steps.messages.list(second.id).items
    assert [m.message_type for m in answering] == ["assistant_message"]
    assert [m.id for m in client.steps.messages.list(first.id, order="desc", limit=1).items
            ] == [calling[-1].id]
    metrics = client.steps.metrics.retrieve(first.id)
    assert metrics.id == first.id and metrics.run_id == run.id
    assert metrics.step_ns and metrics.step_start_ns
    assert metrics.step_start_ns < int(time.time() * 1e9)
    for path in (f"/v1/steps/{first.id}", f"/v1/steps/{first.id}/metrics",
                 f"/v1/steps/{first.id}/messages"):
        assert_letta_shape(path.replace(first.id, "{step_id}"), "get",
                           _json(httpx.get(f"{server.url}{path}")))
    for path in ("", "/metrics", "/messages"):
        response = httpx.get(f"{server.url}/v1/steps/{MISSING_STEP}{path}")
        assert response.status_code == 404 and MISSING_STEP in response.json()["detail"]


def test_feedback_on_a_step_is_kept_and_filterable(server: Server, client: Letta,
                                                   script: Script, shout_tool: Any) -> None:
    agent, run = _two_step_run(client, script)
    first, second = client.runs.steps.list(run.id).items
    marked = client.steps.feedback.create(second.id, feedback="positive", tags=["helpful"])
    assert (marked.feedback, marked.tags) == ("positive", ["helpful"])
    assert client.steps.retrieve(second.id).feedback == "positive"
    assert [s.feedback for s in client.runs.steps.list(run.id)] == [None, "positive"]
    assert [s.id for s in client.steps.list(agent_id=agent.id, feedback="positive")
            ] == [second.id]
    assert [s.id for s in client.steps.list(agent_id=agent.id, has_feedback=False)
            ] == [first.id]
    assert [s.id for s in client.steps.list(agent_id=agent.id, tags=["helpful"])
            ] == [second.id]
    cleared = client.steps.feedback.create(second.id, feedback=None)
    assert (cleared.feedback, cleared.tags) == (None, ["helpful"])  # tags stay unless given
    body = _json(httpx.patch(f"{server.url}/v1/steps/{first.id}/feedback",
                             json={"feedback": "negative"}))
    assert body["feedback"] == "negative"
    assert_letta_shape("/v1/steps/{step_id}/feedback", "patch", body)
    with pytest.raises(letta_client.NotFoundError):
        client.steps.feedback.create(MISSING_STEP, feedback="positive")
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.steps.feedback.create(first.id, feedback="meh")  # type: ignore[arg-type]


def test_run_metrics_count_steps_and_name_the_tools_used(
        server: Server, client: Letta, script: Script, shout_tool: Any) -> None:
    _, run = _two_step_run(client, script)
    metrics = _json(httpx.get(f"{server.url}/v1/runs/{run.id}/metrics"))
    assert metrics["id"] == run.id and metrics["num_steps"] == 2
    assert metrics["tools_used"] == [shout_tool.id]
    assert metrics["run_ns"] > 0 and metrics["run_start_ns"] > 0
    assert_letta_shape("/v1/runs/{run_id}/metrics", "get", metrics)
    assert httpx.get(f"{server.url}/v1/runs/run-nope/metrics").status_code == 404


def test_active_runs_and_deleting_a_finished_run(server: Server, client: Letta,
                                                 script: Script) -> None:
    agent = new_agent(client)
    answer = threading.Event()
    script.set(held(answer, reply("Late.")))
    try:
        run = client.agents.messages.create_async(agent.id, input="take your time")
        active = _json(httpx.get(f"{server.url}/v1/runs/active",
                                 params={"agent_id": agent.id}))
        assert [r["id"] for r in active] == [run.id]
        assert_letta_shape("/v1/runs/active", "get", active)
        assert _json(httpx.get(f"{server.url}/v1/runs/active",
                               params={"agent_id": agent.id, "background": "true"})) == []
        refused = httpx.delete(f"{server.url}/v1/runs/{run.id}")
        assert refused.status_code == 409 and "cancel" in refused.json()["detail"]
    finally:
        answer.set()
    while client.runs.retrieve(run.id).status == "running":
        time.sleep(0.05)
    assert _json(httpx.get(f"{server.url}/v1/runs/active",
                           params={"agent_id": agent.id})) == []
    assert _json(httpx.delete(f"{server.url}/v1/runs/{run.id}")) is None
    with pytest.raises(letta_client.NotFoundError):
        client.runs.retrieve(run.id)
    assert httpx.delete(f"{server.url}/v1/runs/{run.id}").status_code == 404
    kept = [m.message_type for m in client.agents.messages.list(agent.id, order="asc")]
    assert kept[-2:] == ["user_message", "assistant_message"]
