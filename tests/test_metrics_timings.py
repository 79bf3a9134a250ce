"""Where a run's time went, as Letta's routes report it: each step's model time, time to first
token, tool time and length, the run's length and tokens, read by letta-client from a real
server whose model and tool take known times."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import time

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
MODEL_S, TOOL_S = 0.3, 0.4  # what the fake model and the tool take, at least
NS = 1_000_000_000


def test_step_and_run_metrics_are_measured(server: Server, client: Letta,
                                           script: Script) -> None:
    client.tools.upsert(source_code=NAP)
    agent = new_agent(client, tools=["nap"])
    script.set(slow(MODEL_S, call("nap", seconds=TOOL_S)), reply("Rested."))
    before = time.time_ns()
    response = client.agents.messages.create(agent.id, input="Take a nap")
    after = time.time_ns()
    assert response.stop_reason.stop_reason == "end_turn"
    [run] = client.runs.list(agent_id=agent.id).items
    first, second = client.runs.steps.list(run.id).items

    calling = client.steps.metrics.retrieve(first.id)
    assert calling.llm_request_ns is not None and calling.tool_execution_ns is not None
    assert calling.llm_request_ns >= MODEL_S * NS  # the fake model's nap is model time
    assert calling.tool_execution_ns >= TOOL_S * NS  # the tool's nap is tool time
    assert calling.llm_request_ns < TOOL_S * NS + MODEL_S * NS <= calling.step_ns
    assert before <= calling.step_start_ns <= calling.llm_request_start_ns <= after

    answering = client.steps.metrics.retrieve(second.id)
    assert answering.tool_execution_ns == 0  # no call: nothing ran, measured as nothing
    assert 0 < answering.llm_request_ns < MODEL_S * NS
    assert calling.step_start_ns + calling.step_ns <= answering.step_start_ns

    run_metrics = httpx.get(f"{server.url}/v1/runs/{run.id}/metrics").json()  # not in the client
    assert_letta_shape("/v1/runs/{run_id}/metrics", "get", run_metrics)
    assert run_metrics["num_steps"] == 2
    assert calling.step_ns + answering.step_ns <= run_metrics["run_ns"] <= after - before
    retrieved = client.runs.retrieve(run.id)
    assert retrieved.total_duration_ns == run_metrics["run_ns"]
    # the model's first chunk came after its nap, within the first model call
    assert retrieved.ttft_ns is not None
    assert MODEL_S * NS <= retrieved.ttft_ns <= (
        calling.llm_request_start_ns + calling.llm_request_ns - run_metrics["run_start_ns"])
    assert_letta_shape("/v1/runs/{run_id}", "get",
                       httpx.get(f"{server.url}/v1/runs/{run.id}").json())
    usage = client.runs.usage.retrieve(run.id)
    assert usage.prompt_tokens and usage.completion_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens == (client.steps.retrieve(first.id).prompt_tokens
                                   + client.steps.retrieve(second.id).prompt_tokens)
    shape = httpx.get(f"{server.url}/v1/steps/{first.id}/metrics").json()
    assert_letta_shape("/v1/steps/{step_id}/metrics", "get", shape)

