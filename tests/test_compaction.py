"""Compaction: requests fit the window, transcripts stay valid, evicted messages stay findable."""

from __future__ import annotations

import asyncio
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stateloop import Agent, Block, tool
from stateloop.approvals import Approval
from stateloop.llm.base import ToolSpec
from stateloop.llm.tokens import message_tokens
from stateloop.memory.compaction import ContextManager, choose_cut, is_summary
from stateloop.messages import Message, ToolCall, assistant, system, tool_result, user
from stateloop.testing import (
    ScriptedModel,
    assert_transcript_valid,
    call,
    calls,
    error,
    reply,
    transcript_problems,
)

SUMMARIZER = "You keep the running summary"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key} " * 20


def words(n: int, seed: int) -> str:
    return " ".join(f"w{seed}x{i}" for i in range(n))


# -- a random transcript: turns of user text, tool steps with parallel calls, maybe a pending
# approval at the end ------------------------------------------------------------------------

turn = st.tuples(st.integers(1, 60), st.lists(st.integers(1, 3), max_size=3),
                 st.integers(1, 40))


def build_transcript(turns, pending: bool) -> tuple[list[Message], list[str]]:
    messages = [system("You are a test agent. " + words(30, 0))]
    for counter, (user_words, steps, answer_words) in enumerate(turns, 1):
        messages.append(user(words(user_words, counter)))
        for width in steps:
            batch = [ToolCall(f"c{counter}-{len(messages)}-{k}", "lookup", {"key": "k"})
                     for k in range(width)]
            messages.append(assistant(tool_calls=batch))
            messages += [tool_result(c, words(15, counter)) for c in batch]
        messages.append(assistant(words(answer_words, counter)))
    waiting: list[str] = []
    if pending:
        ask = assistant(tool_calls=[ToolCall("pending-call", "lookup", {"key": "x"})])
        messages.append(ask)
        waiting = ["pending-call"]
    return messages, waiting


def summarizer_model() -> ScriptedModel:
    return ScriptedModel(lambda request: reply("## Goals\nkeep testing\n## Current state\nfine"),
                         context_window=8000)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=st.lists(turn, min_size=1, max_size=12), pending=st.booleans(),
       window=st.integers(300, 6000), strategy=st.sampled_from(["summarize",
                                                                 "sliding_window"]),
       twice=st.booleans())
def test_compaction_keeps_transcripts_valid_and_requests_within_budget(
        turns, pending, window, strategy, twice):
    transcript, waiting = build_transcript(turns, pending)
    original = list(transcript)
    model = summarizer_model()
    manager = ContextManager(window=window, reserve=window // 8, model=lambda: model,
                             strategy=strategy)
    tools: list[ToolSpec] = [lookup.spec()]

    async def compact_once():
        return await manager.compact(transcript, tools)

    results = [asyncio.run(compact_once())]
    if twice:
        results.append(asyncio.run(compact_once()))
    assert transcript[0] is original[0]  # the system prompt is never evicted
    assert transcript_problems(transcript, waiting) == []
    if pending:
        assert transcript[-1] is original[-1]  # the pending approval stays
    summaries = [m for m in transcript if is_summary(m)]
    assert len(summaries) <= 1 and (not summaries or transcript[1] is summaries[0])
    kept = [m for m in transcript[1:] if not is_summary(m)]
    evicted = [m for r in results if r is not None for m in r.evicted]
    assert [m.id for m in evicted + kept] == [m.id for m in original[1:]]  # nothing lost
    budget = int((window - window // 8 - manager.count(transcript[:1])
                  - manager.count([]) - _tools_tokens(tools)) * 0.5)
    fits_somewhere = any(manager.count(original[i:]) <= budget
                         for i in range(2, len(original)) if original[i].role != "tool")
    if results[0] is not None and fits_somewhere:
        assert manager.count(kept) <= budget


def _tools_tokens(tools):
    from stateloop.memory.compaction import tool_tokens

    return tool_tokens(tools, None)


def test_choose_cut_never_starts_at_a_tool_result_and_prefers_a_user_turn():
    transcript, _ = build_transcript([(5, [2], 5), (5, [1, 1], 5), (5, [], 5)], False)
    count = len  # one "token" a message
    for budget in range(0, len(transcript) + 1):
        cut = choose_cut(transcript, 1, budget, count)
        if cut is not None:
            assert transcript[cut].role != "tool"
    # With room for the last two turns, the cut falls on the user message that starts them.
    cut = choose_cut(transcript, 1, 9, count)
    assert cut is not None and transcript[cut].role == "user"


async def test_a_second_compaction_updates_the_summary_instead_of_stacking():
    seen: list[str] = []

    def summarize(request):
        seen.append(request.messages[-1].text)
        return reply(f"summary number {len(seen)}")

    model = ScriptedModel(summarize, context_window=8000)
    transcript, _ = build_transcript([(40, [1], 20)] * 6, False)
    manager = ContextManager(window=1500, reserve=100, model=lambda: model)
    first = await manager.compact(transcript, [])
    transcript += build_transcript([(40, [1], 20)] * 4, False)[0][1:]
    second = await manager.compact(transcript, [])
    assert first is not None and second is not None
    assert [m.text for m in transcript if is_summary(m)] == [transcript[1].text]
    assert "summary number 2" in transcript[1].text
    assert "<previous_summary>\nsummary number 1\n</previous_summary>" in seen[1]
    assert second.event.strategy == "summarize"


async def test_a_failing_summarizer_falls_back_to_the_sliding_window():
    model = ScriptedModel([error("overloaded")], context_window=8000)
    transcript, _ = build_transcript([(40, [1], 20)] * 6, False)
    manager = ContextManager(window=1500, reserve=100, model=lambda: model)
    result = await manager.compact(transcript, [])
    assert result is not None and result.event.strategy == "sliding_window"
    assert "conversation_search" in transcript[1].text


async def test_an_agent_compacts_before_the_call_that_would_overflow():
    model = ScriptedModel(lambda request: (
        reply("summary") if request.messages[0].text.startswith(SUMMARIZER)
        else reply(words(60, len(request.messages)))), context_window=1200)
    agent = Agent(model=model, system="Be brief.", compaction="summarize")
    events = []
    for i in range(12):
        async for event in agent.stream(words(60, 100 + i)):
            events.append(event)
    compactions = [e for e in events if e.type == "compaction"]
    assert compactions
    assert all(c.tokens_after < c.tokens_before and c.messages_evicted > 0
               for c in compactions)
    reserve = 1200 // 8
    for request in model.requests:
        if not request.messages[0].text.startswith(SUMMARIZER):
            assert sum(message_tokens(m) for m in request.messages) + reserve <= 1200
    assert_transcript_valid(agent.messages)
    evicted_text = words(60, 100)
    assert all(evicted_text not in m.text for m in agent.messages)
    assert any(evicted_text == m.text for m in agent.recall_messages())


async def test_provider_overflow_compacts_and_retries():
    model = ScriptedModel([reply("a " * 50), reply("b " * 50), reply("c " * 50),
                           error("context_overflow"), reply("the summary"),
                           reply("fits now")], context_window=100_000)
    agent = Agent(model=model)
    for text in ("one", "two", "three"):
        await agent.run(text)
    result = await agent.run("four")
    assert result.stop_reason == "end_turn" and result.output == "fits now"
    assert is_summary(agent.messages[1])
    assert_transcript_valid(agent.messages)


async def test_overflow_that_compaction_cannot_fix_stops_with_the_provider_text():
    model = ScriptedModel([error("context_overflow", "prompt is too long: 9000 > 8000")])
    result = await Agent(model=model).run("hi")
    assert result.stop_reason == "llm_api_error"
    assert "prompt is too long: 9000 > 8000" in (result.error or "")
    assert "nothing more can be moved out of context" in (result.error or "")


async def test_system_prompt_that_cannot_fit():
    model = ScriptedModel([reply("x")], context_window=200)
    agent = Agent(model=model, system=words(400, 1))
    result = await agent.run("hi")
    assert result.stop_reason == "context_window_overflow_in_system_prompt"
    assert "exceeds the context window of 200" in (result.error or "")
    assert model.requests == []


async def test_compact_on_demand_and_the_overview():
    block = Block("human", "Name: Ada")
    model = ScriptedModel([reply(words(30, i)) for i in range(6)], context_window=50_000)
    agent = Agent(model=model, system="Be kind.", blocks=[block], compaction="sliding_window",
                  tool_rules=[{"type": "exit_loop", "tool_name": "memory_insert"}])
    for i in range(6):
        await agent.run(words(30, 50 + i))
    before = agent.context_overview()
    event = await agent.compact()
    assert event is not None and event.messages_evicted > 0
    after = agent.context_overview()
    assert after.num_messages < before.num_messages
    assert after.num_tokens_messages < before.num_tokens_messages
    assert after.summary_memory is not None and "out of context" in after.summary_memory
    for view in (before, after):
        parts = (view.num_tokens_system + view.num_tokens_core_memory
                 + view.num_tokens_external_memory_summary + view.num_tokens_tool_usage_rules
                 + view.num_tokens_summary_memory + view.num_tokens_functions_definitions
                 + view.num_tokens_messages)
        assert view.context_window_size_current == parts
        assert view.context_window_size_max == 50_000
    assert "Name: Ada" in after.core_memory and after.tool_usage_rules
    assert json.loads(json.dumps(after.to_dict()))["num_messages"] == after.num_messages
    view = agent.context_view()
    assert view.splitlines()[1].split()[:3] == ["0", "system", "system"]
    assert "summary" in view and "% used" in view.splitlines()[-1]


async def test_a_pending_approval_survives_compaction():
    @tool(requires_approval=True)
    def launch() -> str:
        """Launch."""
        return "launched"

    model = ScriptedModel([reply(words(40, i)) for i in range(5)] + [call("launch"),
                                                                     reply("done")],
                          context_window=50_000)
    agent = Agent(model=model, tools=[launch], compaction="sliding_window")
    for i in range(5):
        await agent.run(words(40, 80 + i))
    paused = await agent.run("launch it")
    await agent.compact()
    assert_transcript_valid(agent.messages, pending=[paused.pending_approvals[0].id])
    result = await agent.run(approvals=[Approval(paused.pending_approvals[0].id)])
    assert result.output == "done"
    assert_transcript_valid(agent.messages)


async def test_conversation_search_without_a_store_finds_evicted_messages():
    model = ScriptedModel([reply("noted")] + [reply(words(30, i)) for i in range(5)]
                          + [call("conversation_search", query="zebra"), reply("zebra!")],
                          context_window=50_000)
    agent = Agent(model=model, blocks=[Block("human", "")], compaction="sliding_window")
    await agent.run("my favourite animal is the zebra")
    for i in range(5):
        await agent.run(words(30, 200 + i))
    await agent.compact()
    assert all("zebra" not in m.text for m in agent.messages[2:])
    result = await agent.run("what animal?")
    found = json.loads(result.messages[2].text)
    assert found[0]["content"] == "my favourite animal is the zebra"


async def test_parallel_calls_are_kept_with_their_results():
    model = ScriptedModel([calls(call("lookup", key="a"), call("lookup", key="b")),
                           reply("x " * 40)] * 4, context_window=50_000)
    agent = Agent(model=model, tools=[lookup], compaction="sliding_window")
    for i in range(4):
        await agent.run(f"go {i}")
    await agent.compact()
    assert_transcript_valid(agent.messages)
