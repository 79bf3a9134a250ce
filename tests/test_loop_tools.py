"""The tool calls of the loop: failures answered as results, timeouts, cancels reaching a
tool, parallel and sequential calls, and what a tool returns."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from loop_support import agent_with
from stateloop import Agent, tool
from stateloop.loop import CANCELLED_NOTICE
from stateloop.testing import (
    ScriptedModel,
    assert_transcript_valid,
    call,
    calls,
    raw_call,
    reply,
)


async def test_unknown_tool_is_answered_and_the_run_goes_on():
    agent = agent_with([call("multiply", a=2, b=3), reply("sorry")])
    result = await agent.run("2*3?")
    answer = result.messages[2]
    assert answer.is_error
    assert "'multiply' does not exist" in answer.text
    assert "add" in answer.text and "fail" in answer.text
    assert result.stop_reason == "end_turn"


async def test_tool_exception_becomes_error_result():
    agent = agent_with([call("fail", reason="that"), reply("it failed")])
    result = await agent.run("try")
    answer = result.messages[2]
    assert answer.is_error
    assert answer.text == "Error executing function fail: ValueError: cannot do that"
    trace = answer.metadata["stderr"][0]
    assert trace.startswith("Traceback") and trace.rstrip().endswith("cannot do that")
    assert result.output == "it failed"


async def test_bad_arguments_name_the_field_and_show_what_was_received():
    agent = agent_with([call("add", a="one", b=2), reply("oops")])
    result = await agent.run("go")
    answer = result.messages[2]
    assert answer.is_error
    assert "'a'" in answer.text and '"one"' in answer.text
    assert 'Arguments received: {"a": "one", "b": 2}' in answer.text


async def test_missing_and_extra_arguments():
    agent = agent_with([call("add", a=1, c=5), reply("oops")])
    result = await agent.run("go")
    text = result.messages[2].text
    assert "'b' is required but missing" in text
    assert "'c' is not a parameter of this tool" in text


async def test_malformed_json_arguments_are_answered_not_executed():
    agent = agent_with([raw_call("add", '{"a": 1, "b": '), reply("retrying")])
    result = await agent.run("go")
    answer = result.messages[2]
    assert answer.is_error and "not valid JSON" in answer.text
    assert '{"a": 1, "b": ' in answer.text


@pytest.mark.parametrize("computes_first", [False, True])
async def test_tool_timeout(computes_first: bool):
    @tool(timeout=0.05)
    async def slow() -> str:
        """Takes too long."""
        if computes_first:  # the deadline counts from the call, not from its first await
            time.sleep(0.1)
        await asyncio.sleep(5)
        return "never"

    agent = agent_with([call("slow"), reply("gave up")], tools=[slow])
    started = time.perf_counter()
    result = await agent.run("go")
    assert time.perf_counter() - started < 2
    answer = result.messages[2]
    assert answer.is_error and answer.text == "Tool 'slow' timed out after 0.05 s."
    assert result.stop_reason == "end_turn"


async def test_async_tools_that_wait_several_times_return_their_value():
    @tool(timeout=5)
    async def relay(text: str) -> dict:
        """Waits on a future, then twice on the event loop."""
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.set_result, text.upper())
        value = await future
        await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        return {"echo": value}

    @tool(timeout=5)
    async def at_once(n: int) -> int:
        """Finishes without waiting."""
        return n * 2

    agent = agent_with([calls(call("relay", text="hi"), call("at_once", n=21)), reply("ok")],
                       tools=[relay, at_once])
    result = await agent.run("go")
    assert [(m.text, m.is_error) for m in result.messages if m.role == "tool"] == [
        ('{"echo":"HI"}', False), ("42", False)]


async def test_a_cancel_reaches_a_waiting_tool_which_may_clean_up():
    cleaned: list[str] = []
    started = asyncio.Event()

    @tool(timeout=5)
    async def hold() -> str:
        """Waits until cancelled, then cleans up."""
        try:
            started.set()
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # cleanup may itself wait
            cleaned.append("hold")
            raise
        return "never"

    agent = agent_with([call("hold"), reply("unused")], tools=[hold])
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    agent.cancel()
    result = await task
    assert cleaned == ["hold"] and result.stop_reason == "cancelled"
    assert result.messages[2].text == CANCELLED_NOTICE and result.messages[2].is_error
    assert_transcript_valid(agent.messages)


async def test_parallel_tool_timeouts_each_keep_their_own_deadline():
    @tool(timeout=5)
    async def patient() -> str:
        """Finishes well within its deadline, after the hasty call has timed out."""
        await asyncio.sleep(0.2)
        return "done"

    @tool(timeout=0.05)
    async def hasty() -> str:
        """Armed after a later deadline, times out first."""
        await asyncio.sleep(5)
        return "never"

    @tool(timeout=1)
    def sync_slow() -> str:
        """A sync tool in a worker thread also times out."""
        time.sleep(1.5)
        return "never"

    agent = agent_with([calls(call("patient"), call("hasty"), call("sync_slow")),
                        reply("ok")], tools=[patient, hasty, sync_slow])
    started = time.perf_counter()
    result = await agent.run("go")
    assert time.perf_counter() - started < 1.4
    answers = {m.name: m for m in result.messages if m.role == "tool"}
    assert answers["patient"].text == "done" and not answers["patient"].is_error
    assert answers["hasty"].text == "Tool 'hasty' timed out after 0.05 s."
    assert answers["sync_slow"].text == "Tool 'sync_slow' timed out after 1 s."


async def test_sync_tool_runs_off_the_event_loop():
    seen: list[int] = []

    @tool
    def where() -> str:
        """Reports its thread."""
        seen.append(threading.get_ident())
        return "ok"

    await agent_with([call("where"), reply("done")], tools=[where]).run("go")
    assert seen and seen[0] != threading.get_ident()


async def test_parallel_calls_run_concurrently_and_answer_in_call_order():
    finished: list[str] = []

    @tool
    async def wait(label: str, seconds: float) -> str:
        """Sleeps, then returns its label."""
        await asyncio.sleep(seconds)
        finished.append(label)
        return label

    script = [calls(call("wait", label="slow", seconds=0.3), call("wait", label="fast",
                                                                   seconds=0.01),
                    call("wait", label="mid", seconds=0.1)),
              reply("done")]
    agent = agent_with(script, tools=[wait])
    events = [event async for event in agent.stream("go")]
    assert finished == ["fast", "mid", "slow"]  # they overlapped: started in call order
    results = [e.result.text for e in events if e.type == "tool_execution_end"]
    assert results == ["slow", "fast", "mid"]
    assert_transcript_valid(agent.messages)


async def test_sequential_tool_does_not_overlap():
    active = 0
    overlaps = 0

    @tool(sequential=True)
    async def exclusive(n: int) -> int:
        """Must run alone."""
        nonlocal active, overlaps
        active += 1
        overlaps += active > 1
        await asyncio.sleep(0.01)
        active -= 1
        return n

    script = [calls(*(call("exclusive", n=i) for i in range(4))), reply("done")]
    result = await agent_with(script, tools=[exclusive]).run("go")
    assert overlaps == 0
    assert [m.text for m in result.messages if m.role == "tool"] == ["0", "1", "2", "3"]


async def test_tool_return_values_str_as_is_others_as_json():
    @tool
    def data() -> dict:
        """Returns a dict."""
        return {"x": [1, 2], "ok": True}

    @tool
    def text() -> str:
        """Returns text."""
        return "plain {not json}"

    script = [calls(call("data"), call("text")), reply("done")]
    result = await agent_with(script, tools=[data, text]).run("go")
    assert [m.text for m in result.messages if m.role == "tool"] == [
        '{"x":[1,2],"ok":true}', "plain {not json}"]


async def test_long_tool_return_is_truncated_in_the_request_only():
    @tool
    def big() -> str:
        """Returns a lot."""
        return "x" * 9000

    model = ScriptedModel([call("big"), reply("done")])
    agent = Agent(model=model, tools=[big], context_window=4000)  # limit: max(5000, 3200)
    result = await agent.run("go")
    assert len(result.messages[2].text) == 9000  # stored whole
    sent = model.requests[1].messages[-1].text
    assert sent.startswith("x" * 5000) and "x" * 5001 not in sent
    assert "[truncated: 4000 of 9000 characters omitted]" in sent
