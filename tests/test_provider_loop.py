"""Whole agent runs through real adapters and the fake provider server (real sockets, real SSE)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from stateloop import Agent, tool
from stateloop.events import RunEnd, TextDelta
from stateloop.llm.retry import RetryPolicy
from stateloop.testing import call, calls, reply
from stateloop.testing.fake_openai import (
    FakeItem,
    FakeOpenAI,
    context_overflow,
    dropped_connection,
    overloaded,
    rate_limited,
    server_error,
)

OPENAI = "openai/gpt-4o-mini"
ANTHROPIC = "anthropic/claude-haiku-4-5"
PROVIDERS = pytest.mark.parametrize("model", [OPENAI, ANTHROPIC])


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return {"Paris": "sunny", "Oslo": "snow"}.get(city, "unknown")


def agent_for(fake: FakeOpenAI, model: str, retry: RetryPolicy) -> Agent:
    return Agent(model=model, tools=[add, weather], system="You are helpful.",
                 base_url=fake.base_url, api_key="test-key", retry=retry)


def tool_results_sent(body: dict[str, object]) -> list[str]:
    """The tool results in a wire request, whichever API it speaks."""
    results = []
    for message in body["messages"]:  # type: ignore[attr-defined]
        if message.get("role") == "tool":
            results.append(message["content"])
        elif isinstance(message.get("content"), list):
            results += [b.get("content", "") for b in message["content"]
                        if b.get("type") == "tool_result"]
    return results


@PROVIDERS
async def test_tool_loop_end_to_end(model: str, fast_retry: RetryPolicy) -> None:
    with FakeOpenAI([call("add", a=1, b=2), reply("The result is 3.")]) as fake:
        result = await agent_for(fake, model, fast_retry).run("What is 1+2?")
    assert (result.output, result.stop_reason, result.steps) == ("The result is 3.", "end_turn", 2)
    assert tool_results_sent(fake.requests[1].body) == ["3"]
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    expected_path = "/v1/chat/completions" if model == OPENAI else "/v1/messages"
    assert {r.path for r in fake.requests} == {expected_path}


@PROVIDERS
async def test_parallel_calls_are_all_answered(model: str, fast_retry: RetryPolicy) -> None:
    script: list[FakeItem] = [calls(call("weather", city="Paris"), call("weather", city="Oslo")),
              reply("Sunny in Paris, snow in Oslo.")]
    with FakeOpenAI(script) as fake:  # the fake rejects an unanswered call
        result = await agent_for(fake, model, fast_retry).run("Weather in Paris and Oslo?")
    assert result.stop_reason == "end_turn", result.error
    assert tool_results_sent(fake.requests[1].body) == ["sunny", "snow"]


@PROVIDERS
async def test_rate_limits_and_overload_are_retried(model: str, fast_retry: RetryPolicy) -> None:
    faults = [rate_limited(retry_after=0.01), overloaded(), server_error()]
    with FakeOpenAI([reply("Finally.")], faults=faults) as fake:
        result = await agent_for(fake, model, fast_retry).run("hi")
    assert (result.output, result.stop_reason) == ("Finally.", "end_turn")
    assert len(fake.requests) == 4


@PROVIDERS
async def test_retries_run_out(model: str, fast_retry: RetryPolicy) -> None:
    with FakeOpenAI([reply("never")], faults=[overloaded()] * 4) as fake:
        result = await agent_for(fake, model, fast_retry).run("hi")
    assert result.stop_reason == "llm_api_error"
    assert result.error is not None and "Overloaded" in result.error
    assert len(fake.requests) == 4


@PROVIDERS
async def test_context_overflow_is_not_retried(model: str, fast_retry: RetryPolicy) -> None:
    with FakeOpenAI([reply("never")], faults=[context_overflow()]) as fake:
        result = await agent_for(fake, model, fast_retry).run("a very long prompt")
    assert result.stop_reason == "llm_api_error"
    assert result.error is not None and "ContextWindowExceeded" in result.error
    provider_text = ("maximum context length is 128000 tokens" if model == OPENAI
                     else "prompt is too long: 208310 tokens > 200000 maximum")
    assert provider_text in result.error
    assert len(fake.requests) == 1


@PROVIDERS
async def test_dropped_stream_is_retried(model: str, fast_retry: RetryPolicy) -> None:
    text = "A complete answer, streamed in pieces."
    with FakeOpenAI([reply(text)], faults=[dropped_connection(after_chunks=3)]) as fake:
        agent = agent_for(fake, model, fast_retry)
        events = [event async for event in agent.stream("hi")]
    end = events[-1]
    assert end.type == "run_end"
    assert isinstance(end, RunEnd)
    assert (end.output, end.stop_reason) == (text, "end_turn")
    assert len(fake.requests) == 2
    assert any(isinstance(e, TextDelta) for e in events)


@pytest.mark.parametrize(("first", "second"), [(OPENAI, ANTHROPIC), (ANTHROPIC, OPENAI)])
async def test_switching_provider_between_runs(first: str, second: str,
                                               fast_retry: RetryPolicy) -> None:
    script: list[FakeItem] = [call("weather", city="Paris"),
              reply("It is sunny.", reasoning="The tool said sunny."),
              call("add", a=2, b=2),
              reply("4, and still sunny.")]
    with FakeOpenAI(script) as fake:
        agent = agent_for(fake, first, fast_retry)
        before = await agent.run("Weather in Paris?")
        agent.model = second  # the transcript made by one provider feeds the other
        after = await agent.run("And 2+2?")
    assert before.stop_reason == "end_turn", before.error
    assert after.stop_reason == "end_turn", after.error
    assert after.output == "4, and still sunny."
    assert fake.requests[2].path != fake.requests[0].path
    if second == ANTHROPIC:  # unsigned reasoning from another model goes over as text
        assert "<reasoning>The tool said sunny.</reasoning>" in json.dumps(fake.requests[2].body)
    assert tool_results_sent(fake.requests[3].body) == ["sunny", "4"]


def test_run_sync_twice_uses_a_fresh_connection_per_event_loop(fast_retry: RetryPolicy) -> None:
    with FakeOpenAI([reply("one"), reply("two")]) as fake:
        agent = agent_for(fake, OPENAI, fast_retry)
        assert agent.run_sync("1").output == "one"
        assert agent.run_sync("2").output == "two"


async def test_missing_api_key_stops_the_run_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, fast_retry: RetryPolicy) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    agent = Agent(model=OPENAI, retry=fast_retry)  # constructing needs no key
    result = await agent.run("hi")
    assert result.stop_reason == "llm_api_error"
    assert result.error is not None and "OPENAI_API_KEY" in result.error


async def test_unreachable_server_stops_the_run_naming_the_url(fast_retry: RetryPolicy) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    result = await Agent(model=OPENAI, base_url=url, retry=fast_retry).run("hi")
    assert result.stop_reason == "llm_api_error"
    assert result.error is not None and url in result.error


@PROVIDERS
def test_run_sync_in_a_loop_leaves_nothing_behind(model: str) -> None:
    """Each ``run_sync`` has its own event loop: the connections it opened are closed with
    it, so a program calling it many times prints nothing, at exit or before."""
    code = textwrap.dedent(f"""
        from stateloop import Agent
        from stateloop.testing import reply
        from stateloop.testing.fake_openai import FakeOpenAI

        with FakeOpenAI(lambda request: reply("ok")) as fake:
            agent = Agent({model!r}, base_url=fake.base_url, api_key="k")
            results = [agent.run_sync("hi") for _ in range(40)]
        assert all(r.output == "ok" for r in results), results[-1]
        from stateloop.llm._http import _clients
        assert not _clients, _clients  # each loop's client went with its loop
        print(len(results))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONWARNINGS": "default"})
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "40", "")
