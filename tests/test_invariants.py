"""Invariant 1, for random scripts: every call answered once, right after its call, in order."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stateloop import Agent, tool
from stateloop.llm.retry import RetryPolicy
from stateloop.testing import (
    ScriptedModel,
    call,
    calls,
    error,
    raw_call,
    reply,
    transcript_problems,
)


@tool
async def work(ms: int) -> str:
    """Sleeps ``ms`` milliseconds."""
    await asyncio.sleep(ms / 1000)
    return f"worked {ms}"


@tool
def boom(message: str) -> str:
    """Raises."""
    raise RuntimeError(message)


@tool(sequential=True)
async def alone(ms: int) -> str:
    """Sequential sleeper."""
    await asyncio.sleep(ms / 1000)
    return "alone"


single_call = st.one_of(
    st.builds(lambda ms: call("work", ms=ms), st.integers(0, 6)),
    st.builds(lambda ms: call("alone", ms=ms), st.integers(0, 3)),
    st.just(call("boom", message="bad")),
    st.just(call("missing_tool")),
    st.just(call("work", ms="not a number")),
    st.just(raw_call("work", '{"ms": ')),
)
step = st.one_of(
    single_call,
    st.lists(single_call, min_size=2, max_size=4).map(lambda cs: calls(*cs)),
    st.lists(single_call, min_size=1, max_size=3).map(
        lambda cs: calls(*cs, finish_reason="length")),
    st.sampled_from([error("rate_limit"), error("server_error")]),
    st.just(reply("thinking out loud")),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(step, min_size=1, max_size=8),
       cancel_at_event=st.one_of(st.none(), st.integers(0, 40)),
       task_cancel=st.booleans(),
       runs=st.integers(1, 2))
def test_every_call_is_answered(script, cancel_at_event, task_cancel, runs):
    async def consume(agent: Agent) -> str | None:
        stop = None
        count = 0
        async for event in agent.stream("go"):
            if count == cancel_at_event:
                if task_cancel:  # lands at the loop's next await, often inside a tool
                    asyncio.get_running_loop().call_soon(asyncio.current_task().cancel)
                else:
                    agent.cancel()
            count += 1
            if event.type == "run_end":
                stop = event.stop_reason
        return stop

    async def scenario() -> None:
        full_script = [*script, reply("done")] * runs
        agent = Agent(model=ScriptedModel(full_script), tools=[work, boom, alone],
                      max_steps=6, error_threshold=4,
                      retry=RetryPolicy(retries=2, base=0.0005, cap=0.001))
        for _ in range(runs):
            task = asyncio.create_task(consume(agent))
            try:
                stop = await task
            except asyncio.CancelledError:
                assert task_cancel and cancel_at_event is not None
            else:
                assert stop in {"end_turn", "max_steps", "cancelled", "error_threshold",
                                "max_tokens_exceeded", "llm_api_error"}
            problems = transcript_problems(agent.messages[1:])
            assert problems == [], problems
            assert not agent.running

    asyncio.run(scenario())


def test_transcript_problems_detects_each_kind_of_break():
    from stateloop.messages import ToolCall, assistant, tool_result, user

    a, b = ToolCall("a", "work", {}), ToolCall("b", "work", {})
    ask = assistant(tool_calls=[a, b])
    good = [user("hi"), ask, tool_result(a, "1"), tool_result(b, "2")]
    assert transcript_problems(good) == []
    assert transcript_problems([user("hi"), ask, tool_result(a, "1")]) == [
        "end of transcript: calls ['b'] are unanswered"]
    assert "where the result of 'a' was due" in transcript_problems(
        [ask, tool_result(b, "2"), tool_result(a, "1")])[0]
    assert "answers no open call" in transcript_problems([user("hi"), tool_result(a, "1")])[0]
    assert "while calls ['b'] are unanswered" in transcript_problems(
        [ask, tool_result(a, "1"), user("interrupt")])[0]
