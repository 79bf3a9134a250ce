"""Core memory tools: Letta's edit semantics, limits, read-only blocks, prompt recompilation."""

from __future__ import annotations

import pytest

from stateloop import Agent, Block
from stateloop.testing import ScriptedModel, call, reply


def agent_with(script, blocks, **options):
    model = ScriptedModel(script)
    return Agent(model=model, system="sys", blocks=blocks, **options), model


async def test_memory_insert_positions():
    block = Block("human", "line one\nline two")
    agent, _ = agent_with([call("memory_insert", label="human", new_string="start",
                                insert_line=0),
                           call("memory_insert", label="human", new_string="middle",
                                insert_line=2),
                           call("memory_insert", label="human", new_string="end"),
                           reply("ok")], [block])
    result = await agent.run("remember")
    assert block.value == "start\nline one\nmiddle\nline two\nend"
    assert not any(m.is_error for m in result.messages if m.role == "tool")


async def test_memory_insert_out_of_range_is_refused():
    block = Block("human", "a\nb")
    agent, _ = agent_with([call("memory_insert", label="human", new_string="x",
                                insert_line=9), reply("ok")], [block])
    result = await agent.run("go")
    assert result.messages[2].is_error and "use 0 to 2, or -1" in result.messages[2].text
    assert block.value == "a\nb"


async def test_memory_replace_needs_exactly_one_occurrence():
    block = Block("human", "Name: Ada\nPet: cat\nPet: cat")
    agent, _ = agent_with([call("memory_replace", label="human", old_string="Name: Ada",
                                new_string="Name: Grace"),
                           call("memory_replace", label="human", old_string="Pet: cat",
                                new_string="Pet: dog"),
                           call("memory_replace", label="human", old_string="Age",
                                new_string="Age: 36"),
                           reply("ok")], [block])
    result = await agent.run("go")
    answers = [m for m in result.messages if m.role == "tool"]
    assert not answers[0].is_error
    assert answers[1].is_error and "occurs 2 times (lines [2, 3])" in answers[1].text
    assert answers[2].is_error and "does not occur verbatim" in answers[2].text
    assert block.value == "Name: Grace\nPet: cat\nPet: cat"


async def test_limit_is_enforced_with_sizes_in_the_error():
    block = Block("human", "x" * 90, limit=100)
    agent, _ = agent_with([call("memory_insert", label="human", new_string="y" * 20),
                           reply("ok")], [block])
    result = await agent.run("go")
    text = result.messages[2].text
    assert "would hold 111 characters, over its limit of 100 (it holds 90 now)" in text
    assert block.value == "x" * 90


async def test_read_only_and_unknown_blocks_are_refused():
    persona = Block("persona", "I am helpful.", read_only=True)
    human = Block("human", "")
    agent, _ = agent_with([call("memory_rethink", label="persona", new_memory="evil"),
                           call("memory_rethink", label="nope", new_memory="x"),
                           reply("ok")], [persona, human], tools=["memory_rethink"])
    result = await agent.run("go")
    answers = [m.text for m in result.messages if m.role == "tool"]
    assert "'persona' is read-only" in answers[0]
    assert "no memory block labelled 'nope'; blocks: persona, human" in answers[1]
    assert persona.value == "I am helpful."


async def test_line_number_prefixes_are_refused():
    block = Block("human", "a")
    agent, _ = agent_with([call("memory_insert", label="human",
                                new_string="x\nLine 2: y"), reply("ok")], [block])
    result = await agent.run("go")
    assert "line number prefix" in result.messages[2].text


async def test_an_edit_reaches_the_next_step_of_the_same_run():
    block = Block("human", "Name: unknown")
    agent, model = agent_with([call("memory_replace", label="human", old_string="unknown",
                                    new_string="Ada"), reply("Hi Ada")], [block])
    await agent.run("I'm Ada")
    assert "Name: unknown" in model.requests[0].messages[0].text
    assert "Name: Ada" in model.requests[1].messages[0].text
    assert agent.messages[0].text == model.requests[1].messages[0].text


async def test_memgpt_core_memory_tools():
    block = Block("human", "Name: Ada")
    agent, model = agent_with([
        call("core_memory_append", label="human", content="Likes: tea",
             request_heartbeat=True),
        call("core_memory_replace", label="human", old_content="tea", new_content="coffee",
             request_heartbeat=True),
        call("send_message", message="Noted.")], [block], agent_type="memgpt_agent")
    result = await agent.run("I like coffee now")
    assert block.value == "Name: Ada\nLikes: coffee"
    assert result.output == "Noted."
    assert {s.name for s in model.requests[0].tools} == {
        "send_message", "core_memory_append", "core_memory_replace", "memory",
        "memory_apply_patch", "conversation_search"}  # Letta 0.16.8's memgpt_agent set


def test_presets_attach_their_tools():
    blocks = [Block("human", "")]
    assert set(Agent(model=ScriptedModel([]), blocks=blocks).tools) == {
        "memory_insert", "memory_replace", "conversation_search"}
    assert set(Agent(model=ScriptedModel([]), blocks=blocks, agent_type="react_agent").tools) \
        == set()
    assert set(Agent(model=ScriptedModel([])).tools) == set()  # no blocks, no memory tools
    assert set(Agent(model=ScriptedModel([]), blocks=blocks,
                     include_base_tools=False).tools) == set()
    with pytest.raises(ValueError, match="over its limit"):
        Block("human", "x" * 11, limit=10)


async def test_workflow_agent_clears_its_buffer_but_keeps_memory():
    block = Block("state", "")
    agent, model = agent_with([call("memory_rethink", label="state", new_memory="step 1 done"),
                               reply("done"), reply("again")], [block],
                              agent_type="workflow_agent", tools=["memory_rethink"])
    await agent.run("first")
    assert [m.role for m in agent.messages] == ["system"]
    await agent.run("second")
    assert [m.text for m in model.requests[-1].messages[1:]] == ["second"]
    assert "step 1 done" in model.requests[-1].messages[0].text
