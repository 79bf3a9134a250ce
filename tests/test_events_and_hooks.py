"""The event stream, hooks, cancellation and the heartbeat policy."""

from __future__ import annotations

import asyncio
import json

import pytest

from stateloop import Agent, Blocked, Hooks, ToolOutput, tool
from stateloop.loop import CANCELLED_NOTICE
from stateloop.testing import ScriptedModel, assert_transcript_valid, call, calls, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_exact_event_sequence_of_a_two_step_run():
    model = ScriptedModel([call("add", a=1, b=2), reply("The sum is 3.")], chunk_size=8)
    agent = Agent(model=model, tools=[add])
    events = [e async for e in agent.stream("1+2?")]
    assert [e.type for e in events] == [
        "run_start",
        "message",  # the user's input
        "step_start",
        "tool_call_start", "tool_call_delta", "tool_call_delta",  # '{"a": 1,' ' "b": 2}'
        "tool_call_end",
        "message",  # the assistant's call
        "tool_execution_start", "tool_execution_end",
        "message",  # the tool result
        "step_end",
        "step_start",
        "text_delta", "text_delta",  # 'The sum ' 'is 3.'
        "message",
        "step_end",
        "run_end",
    ]
    deltas = [e.delta for e in events if e.type == "tool_call_delta"]
    assert json.loads("".join(deltas)) == {"a": 1, "b": 2}
    assert "".join(e.delta for e in events if e.type == "text_delta") == "The sum is 3."
    assert [e.step for e in events if e.type == "step_start"] == [1, 2]
    start = next(e for e in events if e.type == "tool_call_start")
    end = next(e for e in events if e.type == "tool_call_end")
    assert start.id == end.tool_call.id and start.name == "add"
    assert events[-1].to_dict()["stop_reason"] == "end_turn"


async def test_a_run_without_events_does_exactly_what_a_streamed_run_does():
    from stateloop.loop import LoopConfig, run_loop
    from stateloop.messages import system, user

    async def run(events: bool) -> tuple[list[str], list[tuple], list[str]]:
        log: list[str] = []
        model = ScriptedModel([call("add", a=1, b=2), call("add", a=3, b=4), reply("done")],
                              chunk_size=4)
        config = LoopConfig(model=model, tools={"add": add}, build_context=list,
                            hooks=Hooks(after_step=lambda record: log.append(
                                f"step {record.step}: {len(record.messages)} messages")),
                            events=events)
        transcript = [system("sys")]
        seen = [e.type async for e in run_loop(transcript, [user("go")], config,
                                               run_id="run-1", agent_id="agent-1")]
        return seen, [(m.role, m.text, [(c.name, c.arguments) for c in m.tool_calls], m.name,
                       m.is_error) for m in transcript], log

    streamed, quiet = await run(True), await run(False)
    assert quiet[0] == ["run_start", "run_end"] and len(streamed[0]) > 10
    assert quiet[1:] == streamed[1:]  # the same transcript and the same hook calls
    assert len(quiet[1]) == 7 and quiet[2] == ["step 1: 3 messages", "step 2: 2 messages",
                                               "step 3: 1 messages"]


async def test_hooks_fire_in_order_on_every_step_including_the_last():
    log: list[str] = []

    async def before_model(request):
        log.append(f"before_model:{len(request.messages)}")

    def after_model(response):
        log.append(f"after_model:{len(response.message.tool_calls)}")

    def before_tool(call, arguments):
        log.append(f"before_tool:{call.name}")

    async def after_tool(call, output):
        log.append(f"after_tool:{output.text}")

    def after_step(record):
        log.append(f"after_step:{record.step}")

    hooks = Hooks(before_model, after_model, before_tool, after_tool, after_step)
    agent = Agent(model=ScriptedModel([call("add", a=1, b=2), reply("3")]), tools=[add],
                  hooks=hooks)
    await agent.run("go")
    assert log == ["before_model:2", "after_model:1", "before_tool:add", "after_tool:3",
                   "after_step:1", "before_model:4", "after_model:0", "after_step:2"]


async def test_before_tool_call_can_block_a_call():
    ran: list[int] = []

    @tool
    def delete(path: str) -> str:
        """Deletes a path."""
        ran.append(1)
        return "deleted"

    def guard(call, arguments):
        if arguments["path"].startswith("/etc"):
            return Blocked("system paths are protected")
        return None

    agent = Agent(model=ScriptedModel([call("delete", path="/etc/passwd"), reply("ok")]),
                  tools=[delete], hooks=Hooks(before_tool_call=guard))
    result = await agent.run("go")
    answer = result.messages[2]
    assert not ran
    assert answer.is_error
    assert answer.text == "Tool call to 'delete' was blocked: system paths are protected"


async def test_before_tool_call_can_rewrite_arguments_and_after_tool_call_the_result():
    def double_a(call, arguments):
        return {**arguments, "a": arguments["a"] * 2}

    def annotate(call, output):
        return ToolOutput(f"{output.text} (checked)")

    agent = Agent(model=ScriptedModel([call("add", a=5, b=1), reply("11")]), tools=[add],
                  hooks=Hooks(before_tool_call=double_a, after_tool_call=annotate))
    result = await agent.run("go")
    assert result.messages[2].text == "11 (checked)"
    # The transcript keeps what the model asked for.
    assert result.messages[1].tool_calls[0].arguments == {"a": 5, "b": 1}


async def test_hook_errors_are_programming_errors_and_raise():
    def broken(call, arguments):
        raise KeyError("bug in hook")

    agent = Agent(model=ScriptedModel([call("add", a=1, b=2)]), tools=[add],
                  hooks=Hooks(before_tool_call=broken))
    with pytest.raises(KeyError, match="bug in hook"):
        await agent.run("go")
    assert_transcript_valid(agent.messages)  # the issued call was still answered


@tool
async def sleepy(seconds: float) -> str:
    """Sleeps."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


async def test_cancel_handle_mid_tool_answers_every_call():
    script = [calls(call("sleepy", seconds=0.01), call("sleepy", seconds=5),
                    call("sleepy", seconds=5)),
              reply("unreached")]
    agent = Agent(model=ScriptedModel(script), tools=[sleepy])
    events = []

    async def consume():
        async for event in agent.stream("go"):
            events.append(event)
            if event.type == "tool_execution_start":
                asyncio.get_running_loop().call_later(0.1, agent.cancel)

    await asyncio.wait_for(consume(), 2)
    end = events[-1]
    assert end.type == "run_end" and end.stop_reason == "cancelled"
    results = [e.result for e in events if e.type == "tool_execution_end"]
    assert [r.text for r in results] == ["slept 0.01", CANCELLED_NOTICE, CANCELLED_NOTICE]
    assert [r.is_error for r in results] == [False, True, True]
    assert_transcript_valid(agent.messages)
    # The agent is usable again and the model sees a valid transcript.
    agent.model = ScriptedModel([reply("fresh")])
    assert (await agent.run("again")).output == "fresh"


async def test_cancel_during_model_stream():
    agent = Agent(model=ScriptedModel([reply("slow")], latency=5))

    async def cancel_soon():
        await asyncio.sleep(0.05)
        agent.cancel()

    canceller = asyncio.create_task(cancel_soon())
    result = await asyncio.wait_for(agent.run("go"), 2)
    await canceller
    assert result.stop_reason == "cancelled" and result.steps == 0
    assert [m.role for m in agent.messages] == ["system", "user"]


async def test_asyncio_cancel_of_the_run_task_answers_calls_and_propagates():
    script = [calls(call("sleepy", seconds=5), call("sleepy", seconds=5))]
    agent = Agent(model=ScriptedModel(script), tools=[sleepy])
    task = asyncio.create_task(agent.run("go"))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_transcript_valid(agent.messages)
    assert [m.text for m in agent.messages[-2:]] == [CANCELLED_NOTICE] * 2
    assert not agent.running


async def test_cancel_from_another_thread():
    agent = Agent(model=ScriptedModel([call("sleepy", seconds=5)]), tools=[sleepy])
    loop = asyncio.get_running_loop()
    loop.call_later(0.1, lambda: loop.run_in_executor(None, agent.cancel))
    result = await asyncio.wait_for(agent.run("go"), 2)
    assert result.stop_reason == "cancelled"
    assert_transcript_valid(agent.messages)


async def test_consumer_that_stops_listening_leaves_a_valid_transcript():
    agent = Agent(model=ScriptedModel([calls(call("add", a=1, b=1), call("add", a=2, b=2)),
                                       reply("4")]), tools=[add])
    stream = agent.stream("go")
    async for event in stream:
        if event.type == "tool_execution_end":
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert_transcript_valid(agent.messages)
    assert not agent.running


async def test_heartbeat_policy_continues_only_when_asked_or_failed():
    model = ScriptedModel([
        call("add", a=1, b=2, request_heartbeat=True),
        call("add", a="bad", b=2, request_heartbeat=False),  # fails: continues anyway
        call("send_message", message="It is 3."),  # no heartbeat: the run ends
        reply("unreached"),
    ])
    agent = Agent(model=model, tools=[add], agent_type="memgpt_agent")
    result = await agent.run("1+2?")
    assert result.stop_reason == "end_turn"
    assert result.steps == 3 and model.remaining == 1
    assert result.output == "It is 3."
    schema = {s.name: s.parameters for s in model.requests[0].tools}
    assert "request_heartbeat" in schema["add"]["properties"]
    assert "request_heartbeat" in schema["add"]["required"]
    assert "request_heartbeat" not in schema["send_message"]["properties"]
    heartbeats = [json.loads(m.text) for m in result.messages
                  if m.role == "user" and m.metadata.get("kind") == "heartbeat"]
    assert [h["type"] for h in heartbeats] == ["heartbeat", "heartbeat"]
    assert "request_heartbeat=true" in heartbeats[0]["reason"]
    assert "failed" in heartbeats[1]["reason"]
    # request_heartbeat was not passed to the tool (it would have been rejected as extra).
    assert result.messages[2].text == "3"


async def test_heartbeat_policy_ends_without_heartbeat():
    model = ScriptedModel([call("add", a=1, b=2, request_heartbeat=False), reply("unreached")])
    result = await Agent(model=model, tools=[add], agent_type="memgpt_agent").run("go")
    assert result.steps == 1 and result.stop_reason == "end_turn"
