"""Letta's voice memory tools: chunks of the reviewed transcript filed in the conversation
owner's archival memory, the user's block rewritten, and search by the user's latest words
and by keywords."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from file_support import HashEmbedder
from stateloop import Agent, Block
from stateloop.memory.sleeptime_prompt import REMINDER
from stateloop.testing import ScriptedModel, call, reply
from stateloop.tools.builtin import builtin_tool

VOICE = ["search_memory", "store_memories", "rethink_user_memory", "finish_rethinking_memory"]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agents.db'}"


def tool_texts(result) -> list[tuple[str, bool]]:
    return [(m.text, m.is_error) for m in result.messages if m.role == "tool"]


async def test_rethink_user_memory_rewrites_the_human_block_or_makes_one():
    human = Block("human", "Name: Ada")
    agent = Agent(model=ScriptedModel([
        call("rethink_user_memory", new_memory="Name: Ada\nLikes: tea"),
        call("finish_rethinking_memory"), reply("done")]),
        system="sys", blocks=[human], tools=VOICE)
    result = await agent.run("go")
    assert tool_texts(result) == [("", False), ("", False)]
    assert human.value == "Name: Ada\nLikes: tea"
    bare = Agent(model=ScriptedModel([call("rethink_user_memory", new_memory="Name: Bo"),
                                      reply("done")]), system="sys", tools=VOICE)
    await bare.run("go")
    assert [(b.label, b.value) for b in bare.blocks] == [("human", "Name: Bo")]


async def test_store_memories_files_chunks_and_search_memory_finds_them(db):
    lines = "user: my order id is 4417\nassistant: noted\nuser: ship it to Lyon"
    agent = await Agent.acreate(ScriptedModel([
        call("store_memories", chunks=[
            {"start_index": 0, "end_index": 1, "context": "The user's order is 4417."},
            {"start_index": 2, "end_index": 2, "context": "Shipping goes to Lyon."}]),
        call("store_memories", chunks=[
            {"start_index": 1, "end_index": 7, "context": "out of range"}]),
        reply("stored")]), store=db, name="voice", system="sys", tools=VOICE,
        embedder=HashEmbedder(), error_threshold=None, blocks=[Block("human", "")])
    result = await agent.run(lines)
    answers = tool_texts(result)
    assert answers[0] == ("", False)
    assert answers[1] == ("Error executing function store_memories: ValueError: Failed to "
                          "store memory given start_index 1 and end_index 7: the transcript's "
                          "lines are 0 to 2", True)
    passages = await agent.archival().search(agent.id, "order shipping", top_k=10)
    assert sorted(hit.passage.text for hit in passages) == sorted([
        "<memory><messages><message>user: my order id is 4417</message><message>assistant: "
        "noted</message></messages><context>The user's order is 4417.</context></memory>",
        "<memory><messages><message>user: ship it to Lyon</message></messages><context>"
        "Shipping goes to Lyon.</context></memory>"])
    assert agent.archival_count == 2

    agent.model = ScriptedModel([
        call("search_memory", convo_keyword_queries=["Lyon", "zebra"], start_minutes_ago=None,
             end_minutes_ago=60),
        call("search_memory", start_minutes_ago=None, end_minutes_ago=None),
        reply("found")])
    result = await agent.run("where does my order 4417 ship to?")
    first = json.loads(tool_texts(result)[0][0])
    assert first["archival_search_results"][0]["content"].startswith(
        "<memory><messages><message>user: my order id is 4417")
    assert {"timestamp", "content"} == set(first["archival_search_results"][0])
    assert first["convo_keyword_search_results"] == {
        "Lyon": ["user: my order id is 4417\nassistant: noted\nuser: ship it to Lyon"]}
    second = json.loads(tool_texts(result)[1][0])
    assert len(second["archival_search_results"]) == 2
    assert "convo_keyword_search_results" not in second


async def test_a_memory_agent_files_chunks_for_its_main_agent_and_rewrites_its_user(db):
    agent = await Agent.acreate(ScriptedModel([reply("ok")] * 3), store=db, name="talker",
                                system="Chat.", blocks=[Block("human", "Name: Ada")],
                                embedder=HashEmbedder(), enable_sleeptime=True,
                                sleeptime_agent_frequency=1)
    assert agent.sleeptime is not None
    memory = await agent.sleeptime.memory_agent()
    for name in VOICE:
        memory.tools[name] = builtin_tool(name)
    memory_model = ScriptedModel([
        call("store_memories", chunks=[
            {"start_index": 0, "end_index": 1, "context": "Ada likes green tea."}]),
        call("rethink_user_memory", new_memory="Name: Ada\nDrinks: green tea"),
        call("memory_finish_edits")])
    agent.sleeptime.model = memory_model
    await agent.run("I only drink green tea")
    await agent.sleeptime.wait()
    reviewed = memory_model.requests[0].messages[-1].text
    assert reviewed.startswith(REMINDER)
    assert reviewed.removeprefix(REMINDER).split("\n")[:2] == [
        "user: I only drink green tea", "assistant: ok"]
    hits = await agent.archival().search(agent.id, "green tea", top_k=5)
    assert [hit.passage.text for hit in hits] == [
        "<memory><messages><message>user: I only drink green tea</message><message>assistant: "
        "ok</message></messages><context>Ada likes green tea.</context></memory>"]
    assert await memory.archival().search(memory.id, "green tea") == []
    await agent.run("hello")
    assert "Drinks: green tea" in agent.messages[0].text  # the shared block, rewritten
