"""The agent loop against a scripted model: every stop reason, model failures and retries,
and a conversation across runs. Tool-call behaviour is in test_loop_tools.py."""

from __future__ import annotations

import asyncio
import time

import pytest

from loop_support import add, agent_with
from stateloop import Agent, Block, ConfigError, tool
from stateloop.events import RunEnd
from stateloop.llm.retry import RetryPolicy
from stateloop.loop import LENGTH_CUTOFF_NOTICE
from stateloop.testing import (
    ScriptedModel,
    assert_transcript_valid,
    call,
    calls,
    error,
    reply,
)


async def test_plain_answer():
    agent = agent_with([reply("Hello there.")])
    result = await agent.run("Hi")
    assert (result.output, result.stop_reason, result.steps) == ("Hello there.", "end_turn", 1)
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert result.error is None
    assert result.usage.output_tokens > 0 and result.usage.input_tokens > 0


def test_design_example_one_tool_call_then_answer():
    model = ScriptedModel([call("add", a=1, b=2), reply("The result is 3.")])
    agent = Agent(model=model, tools=[add], system="You are helpful.",
                  blocks=[Block(label="human", value="")], max_steps=50)
    result = agent.run_sync("What is 1+2?")
    assert result.output == "The result is 3."
    assert result.stop_reason == "end_turn"
    assert result.steps == 2
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    tool_message = result.messages[2]
    assert tool_message.text == "3" and not tool_message.is_error
    assert tool_message.tool_call_id == result.messages[1].tool_calls[0].id
    assert result.messages[1].tool_calls[0].arguments == {"a": 1, "b": 2}
    # The second request carried the tool result; the system prompt rendered the block.
    second = model.requests[1].messages
    assert second[-1].role == "tool" and second[-1].text == "3"
    assert "<human>" in second[0].text and "You are helpful." in second[0].text
    assert [spec.name for spec in model.requests[0].tools] == [
        "memory_insert", "memory_replace", "conversation_search", "add"]  # with a block
    assert result.usage.output_tokens > 0
    assert result.usage.input_tokens > len(model.requests[0].messages[0].text) // 4


async def test_several_steps():
    agent = agent_with([call("add", a=1, b=2), call("add", a=3, b=3), call("add", a=6, b=4),
                        reply("10")])
    result = await agent.run("Sum 1..4")
    assert result.steps == 4 and result.output == "10"
    assert [m.text for m in result.messages if m.role == "tool"] == ["3", "6", "10"]


async def test_max_steps_stops_after_executing_the_last_calls():
    agent = agent_with([call("add", a=i, b=1) for i in range(10)], max_steps=3)
    result = await agent.run("loop forever")
    assert result.stop_reason == "max_steps"
    assert result.steps == 3
    assert "3 steps" in (result.error or "")
    assert_transcript_valid(agent.messages)
    assert [m.role for m in agent.messages][-1] == "tool"


async def test_error_threshold():
    agent = agent_with([call("fail", reason=str(i)) for i in range(10)], error_threshold=3)
    result = await agent.run("go")
    assert result.stop_reason == "error_threshold"
    assert result.steps == 3
    assert "cannot do 2" in (result.error or "")
    assert_transcript_valid(agent.messages)


async def test_error_threshold_counts_only_consecutive_all_failing_steps():
    script = [call("fail", reason="1"), call("fail", reason="2"), call("add", a=1, b=1),
              call("fail", reason="3"), call("fail", reason="4"), reply("done")]
    result = await agent_with(script, error_threshold=3).run("go")
    assert result.stop_reason == "end_turn"


async def test_error_threshold_can_be_off():
    script = [call("fail", reason=str(i)) for i in range(6)] + [reply("done")]
    result = await agent_with(script, error_threshold=None).run("go")
    assert result.stop_reason == "end_turn" and result.steps == 7


async def test_length_cutoff_answers_calls_once_then_stops():
    script = [calls(call("add", a=1, b=2), finish_reason="length"),
              calls(call("add", a=1, b=2), finish_reason="length"),
              reply("never reached")]
    model = ScriptedModel(script)
    agent = Agent(model=model, tools=[add])
    result = await agent.run("go")
    assert result.stop_reason == "max_tokens_exceeded"
    assert result.steps == 2
    tool_messages = [m for m in result.messages if m.role == "tool"]
    assert len(tool_messages) == 2
    assert all(m.is_error and m.text == LENGTH_CUTOFF_NOTICE for m in tool_messages)
    assert model.remaining == 1
    assert_transcript_valid(agent.messages)


async def test_length_cutoff_then_complete_call_goes_on():
    script = [calls(call("add", a=1, b=2), finish_reason="length"), call("add", a=1, b=2),
              reply("3")]
    result = await agent_with(script).run("go")
    assert result.stop_reason == "end_turn" and result.output == "3"
    assert [m.text for m in result.messages if m.role == "tool"][-1] == "3"


async def test_transient_errors_are_retried(fast_retry):
    model = ScriptedModel([error("rate_limit"), error("overloaded"), error("server_error"),
                           reply("finally")])
    result = await Agent(model=model, retry=fast_retry).run("go")
    assert result.stop_reason == "end_turn" and result.output == "finally"
    assert len(model.requests) == 4
    assert result.steps == 1


async def test_retries_exhausted(fast_retry):
    model = ScriptedModel([error("overloaded")] * 4 + [reply("unreached")])
    result = await Agent(model=model, retry=fast_retry).run("go")
    assert result.stop_reason == "llm_api_error"
    assert result.error == "Overloaded after 4 attempts: The model is overloaded."
    assert len(model.requests) == 4
    assert [m.role for m in result.messages] == ["user"]


async def test_non_transient_error_is_not_retried_and_keeps_the_provider_text(fast_retry):
    model = ScriptedModel([error("invalid_request", "messages.3: tool_use ids must be unique")])
    result = await Agent(model=model, retry=fast_retry).run("go")
    assert result.stop_reason == "llm_api_error"
    assert result.error == "InvalidRequest: messages.3: tool_use ids must be unique"
    assert len(model.requests) == 1


async def test_retry_after_is_honoured():
    model = ScriptedModel([error("rate_limit", retry_after=0.2), reply("ok")])
    # A backoff base this large would take minutes; Retry-After says 0.2 s.
    agent = Agent(model=model, retry=RetryPolicy(retries=1, base=100, cap=100))
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    assert result.output == "ok"
    assert 0.19 <= elapsed < 2


async def test_empty_response_is_retried_then_invalid_llm_response(fast_retry):
    model = ScriptedModel([reply("")] * 4)
    result = await Agent(model=model, retry=fast_retry).run("go")
    assert result.stop_reason == "invalid_llm_response"
    assert "empty response" in (result.error or "")
    assert len(model.requests) == 4


async def test_empty_response_then_good_one(fast_retry):
    model = ScriptedModel([reply(""), reply("hello")])
    result = await Agent(model=model, retry=fast_retry).run("go")
    assert result.output == "hello" and result.stop_reason == "end_turn"


async def test_whole_run_timeout():
    @tool
    async def nap() -> str:
        """Sleeps."""
        await asyncio.sleep(0.05)
        return "rested"

    agent = agent_with([call("nap")] * 100, tools=[nap], timeout=0.2)
    result = await agent.run("go")
    assert result.stop_reason == "timeout"
    assert 1 <= result.steps < 100
    assert_transcript_valid(agent.messages)


async def test_history_carries_over_between_runs():
    model = ScriptedModel([reply("Nice to meet you, Ada."), reply("Your name is Ada.")])
    agent = Agent(model=model)
    await agent.run("My name is Ada.")
    result = await agent.run("What is my name?")
    assert result.output == "Your name is Ada."
    sent = [m.text for m in model.requests[1].messages]
    assert sent[1:] == ["My name is Ada.", "Nice to meet you, Ada.", "What is my name?"]
    assert [m.role for m in result.messages] == ["user", "assistant"]


async def test_reset_clears_the_conversation_but_keeps_system_and_blocks():
    model = ScriptedModel([reply("one"), reply("two")])
    agent = Agent(model=model, system="sys", blocks=[Block("persona", "I am kind.")])
    await agent.run("first")
    agent.reset()
    assert [m.role for m in agent.messages] == ["system"]
    await agent.run("second")
    sent = model.requests[1].messages
    assert [m.text for m in sent[1:]] == ["second"]
    assert "I am kind." in sent[0].text


async def test_block_change_recompiles_the_system_prompt_between_runs():
    block = Block("human", "")
    model = ScriptedModel([reply("a"), reply("b")])
    agent = Agent(model=model, system="sys", blocks=[block])
    await agent.run("1")
    block.value = "Name: Ada"
    await agent.run("2")
    assert "Name: Ada" not in model.requests[0].messages[0].text
    assert "Name: Ada" in model.requests[1].messages[0].text
    assert "chars_current=9" in model.requests[1].messages[0].text


async def test_concurrent_runs_on_one_agent_are_queued_not_interleaved():
    model = ScriptedModel(lambda request: reply(f"echo {request.messages[-1].text}"),
                          latency=0.01)
    agent = Agent(model=model)
    results = await asyncio.gather(*(agent.run(f"m{i}") for i in range(5)))
    assert [r.output for r in results] == [f"echo m{i}" for i in range(5)]
    texts = [m.text for m in agent.messages[1:]]
    assert texts == [t for i in range(5) for t in (f"m{i}", f"echo m{i}")]


async def test_script_exhausted_is_a_programming_error():
    from stateloop.testing import ScriptExhausted

    agent = agent_with([call("add", a=1, b=1)])
    with pytest.raises(ScriptExhausted, match="script has 1 items"):
        await agent.run("go")
    assert_transcript_valid(agent.messages)


async def test_run_end_is_always_last_and_carries_the_result():
    agent = agent_with([call("add", a=1, b=2), reply("3")])
    events = [e async for e in agent.stream("go")]
    end = events[-1]
    assert isinstance(end, RunEnd)
    assert end.stop_reason == "end_turn" and end.output == "3" and end.steps == 2
    assert agent.last_result is not None and agent.last_result.run_id == end.run_id


async def test_max_steps_and_model_for_one_run():
    agent = agent_with([call("add", a=1, b=2), call("add", a=3, b=4), reply("done")])
    result = await agent.run("go", max_steps=1)
    assert (result.stop_reason, result.steps, agent.max_steps) == ("max_steps", 1, 50)

    other = ScriptedModel([reply("other model")])
    result = await agent.run("again", model=other)
    assert result.output == "other model" and len(other.requests) == 1
    assert agent.model is not other  # the agent keeps its own model
    with pytest.raises(ConfigError, match="max_steps must be a positive integer"):
        await agent.run("x", max_steps=0)


@pytest.mark.parametrize(("bad", "named"), [(5, "int"), ({"hello": 1}, "dict"),
                                            (["hi", 3], "int")])
async def test_run_input_that_is_not_messages_is_refused_by_name(bad, named):
    agent = agent_with([reply("never")])
    with pytest.raises(TypeError, match=f"a Message or a list of them, not {named}$"):
        await agent.run(bad)
    assert [m.role for m in agent.messages] == ["system"]  # nothing went in
