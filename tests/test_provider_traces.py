"""Provider traces: a step's model request and response at ``GET /v1/steps/{id}/trace`` (and
the deprecated ``/v1/telemetry/{id}``), recorded only when the operator sets
``STATELOOP_PROVIDER_TRACES``, read by letta-client from a real server on SQLite and
PostgreSQL; bounded in size and deleted with their agent in the store."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from letta_client import Letta

from fake_script import Script
from letta_spec import assert_letta_shape
from stateloop.server.provider_traces import MAX_SIDE_BYTES, bounded
from stateloop.store import AgentRecord, open_store
from stateloop.store.records import ProviderTraceRecord
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from test_server_support import (  # noqa: F401 (fixtures)
    Server,
    client,
    fake,
    new_agent,
    script,
    server,
    settings_for,
)

SHOUT = '''
def shout(text: str) -> str:
    """Say it loud.

    Args:
        text: What to say.
    """
    return text.upper()
'''


def _tool_calling_run(client: Letta, script: Script) -> tuple[Any, Any, Any]:
    client.tools.upsert(source_code=SHOUT)
    agent = new_agent(client, tools=["shout"])
    script.set(call("shout", text="hi"), reply("Done."))
    client.agents.messages.create(agent.id, input="Shout hi")
    [run] = client.runs.list(agent_id=agent.id).items
    first, second = client.runs.steps.list(run.id).items
    return agent, first, second


def test_recorded_steps_show_their_model_request_and_response(
        fake: FakeOpenAI, script: Script, tmp_path: Path, db_url: str) -> None:
    settings = settings_for(fake, tmp_path / "unused.db", database_url=db_url,
                            provider_traces=True)
    with Server(settings) as running:
        client = Letta(base_url=running.url, api_key="unused", max_retries=0, timeout=30)
        agent, first, second = _tool_calling_run(client, script)

        trace = client.steps.trace.retrieve(first.id)
        assert trace is not None
        assert (trace.step_id, trace.agent_id, trace.run_id, trace.call_type) == (
            first.id, agent.id, first.run_id, "agent_step")
        sent = trace.request_json  # the provider's request body, as sent
        assert sent["model"] == "gpt-4o-mini" and sent["stream"] is True
        assert sent["messages"][-1] == {"role": "user", "content": sent["messages"][-1][
            "content"]} and "Shout hi" in str(sent["messages"][-1]["content"])
        assert [tool["function"]["name"] for tool in sent["tools"]] == ["shout"]
        [called] = trace.response_json["message"]["tool_calls"]
        assert called["name"] == "shout" and called["arguments"] == {"text": "hi"}

        answered = client.steps.trace.retrieve(second.id)
        assert answered is not None and answered.response_json["message"]["content"]
        assert answered.request_json["messages"][-1]["role"] == "tool"  # HI, the tool's result

        raw = httpx.get(f"{running.url}/v1/steps/{first.id}/trace").json()
        assert_letta_shape("/v1/steps/{step_id}/trace", "get", raw)
        assert httpx.get(f"{running.url}/v1/telemetry/{first.id}").json() == raw


def test_without_recording_a_step_s_trace_is_null(server: Server, client: Letta,
                                                  script: Script) -> None:
    _, first, _ = _tool_calling_run(client, script)
    for path in (f"/v1/steps/{first.id}/trace", f"/v1/telemetry/{first.id}"):
        answer = httpx.get(f"{server.url}{path}")
        assert answer.status_code == 200 and answer.json() is None
    assert client.steps.trace.retrieve(first.id) is None
    unknown = "step-00000000-0000-4000-8000-000000000000"
    for path in (f"/v1/steps/{unknown}/trace", f"/v1/telemetry/{unknown}"):
        assert httpx.get(f"{server.url}{path}").status_code == 404


def test_a_side_over_the_bound_is_stored_cut_with_a_marker() -> None:
    small = {"messages": [{"role": "user", "content": "hi"}]}
    assert bounded(small) == small
    big = {"messages": [{"role": "user", "content": "x" * MAX_SIDE_BYTES}]}
    cut = bounded(big)
    assert cut["truncated"] is True and cut["size_bytes"] > MAX_SIDE_BYTES
    assert len(cut["text"]) == MAX_SIDE_BYTES and cut["text"].startswith('{"messages"')


async def test_traces_are_stored_and_deleted_with_their_agent(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        agent = await store.create_agent(AgentRecord(name="traced"))
        await store.add_provider_trace(ProviderTraceRecord(
            step_id="step-1", agent_id=agent.id, run_id="run-1",
            request_json={"messages": [{"role": "user", "content": "é"}]},
            response_json={"finish_reason": "stop"}))
        found = await store.get_provider_trace("step-1")
        assert found is not None and found.agent_id == agent.id
        assert found.request_json["messages"][0]["content"] == "é"
        assert found.id.startswith("provider_trace-")
        assert await store.get_provider_trace("step-2") is None
        await store.delete_agent(agent.id)
        assert await store.get_provider_trace("step-1") is None
    finally:
        await store.close()
