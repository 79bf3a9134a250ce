"""Steering a run in flight, follow-ups, and transient context notes."""

from __future__ import annotations

import asyncio

from stateloop import Agent, Hooks, tool
from stateloop.steering import SKIPPED_NOTICE, nudge_after_failures
from stateloop.testing import ScriptedModel, assert_transcript_valid, call, calls, reply


@tool
async def slow(label: str) -> str:
    """Takes a moment."""
    await asyncio.sleep(0.05)
    return f"{label} done"


@tool(sequential=True)
async def step_tool(label: str) -> str:
    """One at a time."""
    await asyncio.sleep(0.02)
    return f"{label} done"


def texts(messages):
    return [(m.role, m.text) for m in messages]


async def steer_at(agent: Agent, text: str, when: str, mode: str = "after_batch"):
    """Run, and steer once the first event of type ``when`` arrives."""
    events = []
    steered = False
    async for event in agent.stream("start"):
        events.append(event)
        if event.type == when and not steered:
            steered = True
            agent.steer(text, mode)  # type: ignore[arg-type]
    return events


async def test_steer_is_delivered_after_the_batch_before_the_next_model_call():
    model = ScriptedModel([calls(call("slow", label="a"), call("slow", label="b")),
                           reply("changed course")])
    agent = Agent(model=model, tools=[slow])
    events = await steer_at(agent, "actually, stop", "tool_execution_start")
    assert events[-1].stop_reason == "end_turn"
    second = model.requests[1].messages
    assert texts(second[-3:]) == [("tool", "a done"), ("tool", "b done"),
                                  ("user", "actually, stop")]
    assert_transcript_valid(agent.messages)


async def test_steer_interrupt_skips_calls_not_started():
    model = ScriptedModel([calls(call("step_tool", label="1"), call("step_tool", label="2"),
                                 call("step_tool", label="3")),
                           reply("ok, stopping")])
    agent = Agent(model=model, tools=[step_tool])
    events = []
    async for event in agent.stream("start"):
        events.append(event)
        if event.type == "tool_execution_start" and event.tool_call.arguments["label"] == "1":
            asyncio.get_running_loop().call_later(0.01, agent.steer, "halt", "interrupt")
    results = [e.result.text for e in events if e.type == "tool_execution_end"]
    assert results == ["1 done", SKIPPED_NOTICE, SKIPPED_NOTICE]
    assert model.requests[1].messages[-1].text == "halt"
    assert_transcript_valid(agent.messages)


async def test_steer_arriving_as_the_model_answers_keeps_the_run_going():
    model = ScriptedModel([reply("first answer"), reply("answer to the steer")])
    agent = Agent(model=model)
    events = await steer_at(agent, "one more thing", "text_delta")
    assert events[-1].output == "answer to the steer"
    assert len(model.requests) == 2


async def test_follow_ups_run_when_the_agent_would_stop():
    model = ScriptedModel([call("slow", label="a"), reply("first done"),
                           reply("second done")])
    agent = Agent(model=model, tools=[slow])
    events = []
    async for event in agent.stream("first task"):
        events.append(event)
        if event.type == "tool_execution_start":
            agent.follow_up("second task")
    second = [m.text for m in model.requests[2].messages]
    assert second[-2:] == ["first done", "second task"]
    assert events[-1].output == "second done"


async def test_delivery_one_at_a_time():
    model = ScriptedModel([call("slow", label="a"), reply("r1"), reply("r2")])
    agent = Agent(model=model, tools=[slow], steering_delivery="one")
    async for event in agent.stream("go"):
        if event.type == "tool_execution_start":
            agent.steer("s1")
            agent.steer("s2")
    assert model.requests[1].messages[-1].text == "s1"
    assert model.requests[2].messages[-1].text == "s2"
    assert [m.text for m in model.requests[2].messages[-3:]] == ["s1", "r1", "s2"]


async def test_delivery_all_at_once():
    model = ScriptedModel([call("slow", label="a"), reply("r1")])
    agent = Agent(model=model, tools=[slow])
    async for event in agent.stream("go"):
        if event.type == "tool_execution_start":
            agent.steer("s1")
            agent.steer("s2")
    assert [m.text for m in model.requests[1].messages[-2:]] == ["s1", "s2"]


async def test_steering_an_idle_agent_starts_a_run():
    agent = Agent(model=ScriptedModel([reply("hello")]))
    task = agent.steer("hi")
    assert task is not None
    result = await task
    assert result.output == "hello"
    assert texts(agent.messages[1:]) == [("user", "hi"), ("assistant", "hello")]


async def test_nudge_after_failures_adds_a_transient_note():
    @tool
    def flaky(n: int) -> str:
        """Always fails."""
        raise RuntimeError("service down")

    model = ScriptedModel([call("flaky", n=1), call("flaky", n=2), reply("switching")])
    agent = Agent(model=model, tools=[flaky], error_threshold=None,
                  hooks=Hooks(transform_context=nudge_after_failures(2)))
    await agent.run("go")
    assert "Automated note" not in model.requests[1].messages[-1].text
    note = model.requests[2].messages[-1]
    assert "last 2 tool calls failed" in note.text
    assert all("Automated note" not in m.text for m in agent.messages)  # never persisted


async def test_a_hook_can_change_the_tools_between_steps():
    @tool
    def a() -> str:
        """A."""
        return "a"

    @tool
    def b() -> str:
        """B."""
        return "b"

    def only_b_after_first_step(request):
        if len(request.messages) > 2:
            request.tools = [spec for spec in request.tools if spec.name == "b"]

    model = ScriptedModel([call("a"), call("a"), call("b"), reply("done")])
    agent = Agent(model=model, tools=[a, b],
                  hooks=Hooks(before_model_call=only_b_after_first_step))
    result = await agent.run("go")
    assert [s.name for s in model.requests[1].tools] == ["b"]
    tool_texts = [m.text for m in result.messages if m.role == "tool"]
    assert tool_texts[0] == "a"
    assert "'a' is not available at this step. Available tools: b." in tool_texts[1]
    assert tool_texts[2] == "b"
