"""A run's trace at ``GET /v1/runs/{id}/trace``, read by letta-client from a real server: the
run's spans rebuilt from its steps' stored times, as rows of ClickHouse's ``otel_traces``
table, named as Letta's trace viewer picks them out, with no collector configured."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from collections import Counter

import httpx
from letta_client import Letta

from fake_script import Script, slow
from letta_spec import assert_letta_shape
from stateloop.testing.scripted import call, reply
from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

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
FAIL = '''
def fail() -> str:
    """Fail every time."""
    raise ValueError("no luck")
'''
MODEL_S, TOOL_S = 0.2, 0.3
NS = 1_000_000_000
ROW = {"Timestamp", "TraceId", "SpanId", "ParentSpanId", "TraceState", "SpanName", "SpanKind",
       "ServiceName", "ResourceAttributes", "ScopeName", "ScopeVersion", "SpanAttributes",
       "Duration", "StatusCode", "StatusMessage", "Events.Timestamp", "Events.Name",
       "Events.Attributes", "Links.TraceId", "Links.SpanId", "Links.TraceState",
       "Links.Attributes"}


def test_a_run_s_trace_is_its_spans_rebuilt_from_the_store(server: Server, client: Letta,
                                                          script: Script) -> None:
    client.tools.upsert(source_code=NAP)
    agent = new_agent(client, tools=["nap"])
    script.set(slow(MODEL_S, call("nap", seconds=TOOL_S)), reply("Rested."))
    client.agents.messages.create(agent.id, input="Take a nap")
    [run] = client.runs.list(agent_id=agent.id).items
    first, second = client.runs.steps.list(run.id).items

    rows = client.runs.trace.retrieve(run.id)
    assert all(set(row) == ROW for row in rows)
    assert_letta_shape("/v1/runs/{run_id}/trace", "get", rows)
    model = agent.model.rpartition("/")[2] if agent.model else ""
    assert model and Counter(row["SpanName"] for row in rows) == Counter({
        "invoke_agent": 1, "agent_step": 2, "time_to_first_token": 2, "Agent._execute_tool": 1,
        f"chat {model}": 2})
    [root] = [row for row in rows if row["ParentSpanId"] == ""]
    assert root["SpanName"] == "invoke_agent" and root is rows[0]  # oldest first
    assert len({row["TraceId"] for row in rows}) == 1 and len(root["TraceId"]) == 32
    assert len({row["SpanId"] for row in rows}) == len(rows)
    assert root["SpanAttributes"]["stateloop.stop_reason"] == "end_turn"
    assert root["SpanAttributes"]["stateloop.steps"] == "2"
    assert root["StatusCode"] == "STATUS_CODE_UNSET" and root["ServiceName"] == "stateloop"

    steps = {row["SpanAttributes"]["stateloop.step.id"]: row for row in rows
             if row["SpanName"] == "agent_step"}
    assert set(steps) == {first.id, second.id}
    assert all(row["ParentSpanId"] == root["SpanId"] for row in steps.values())
    measured = client.steps.metrics.retrieve(first.id)
    assert steps[first.id]["Duration"] == measured.step_ns
    [chat] = [row for row in rows if row["SpanName"].startswith("chat ")
              and row["ParentSpanId"] == steps[first.id]["SpanId"]]
    assert chat["Duration"] == measured.llm_request_ns >= MODEL_S * NS
    assert chat["SpanKind"] == "SPAN_KIND_CLIENT"
    assert int(chat["SpanAttributes"]["gen_ai.usage.input_tokens"]) > 0
    [tool] = [row for row in rows if row["SpanName"] == "Agent._execute_tool"]
    assert tool["ParentSpanId"] == steps[first.id]["SpanId"]
    assert tool["SpanAttributes"]["gen_ai.tool.name"] == "nap"
    assert TOOL_S * NS <= tool["Duration"] <= measured.tool_execution_ns
    assert tool["StatusCode"] == "STATUS_CODE_UNSET"
    assert steps[first.id]["Timestamp"] <= chat["Timestamp"] < tool["Timestamp"]
    assert root["Duration"] >= steps[first.id]["Duration"] + steps[second.id]["Duration"]

    assert client.runs.trace.retrieve(run.id) == rows  # the same ids every time
    assert client.runs.trace.retrieve(run.id, limit=2) == rows[:2]


def test_a_failed_tool_call_is_an_error_span(server: Server, client: Letta,
                                             script: Script) -> None:
    client.tools.upsert(source_code=FAIL)
    agent = new_agent(client, tools=["fail"])
    script.set(call("fail"), reply("It failed."))
    client.agents.messages.create(agent.id, input="Try it")
    [run] = client.runs.list(agent_id=agent.id).items
    [tool] = [row for row in client.runs.trace.retrieve(run.id)
              if row["SpanName"] == "Agent._execute_tool"]
    assert tool["StatusCode"] == "STATUS_CODE_ERROR"
    assert tool["SpanAttributes"]["gen_ai.tool.name"] == "fail"


def test_a_trace_s_limit_is_bounded_and_an_unknown_run_is_not_found(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        missing = http.get("/v1/runs/run-00000000-0000-4000-8000-000000000000/trace")
        assert missing.status_code == 404
        for limit in (0, 5001):
            answer = http.get("/v1/runs/run-00000000-0000-4000-8000-000000000000/trace",
                              params={"limit": limit})
            assert answer.status_code == 422 and "limit" in answer.text
