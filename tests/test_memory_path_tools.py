"""Letta's ``memory`` and ``memory_apply_patch`` tools on a running agent: each sub-command's
effect and answer (Letta's words), refusals that change nothing, blocks addressed by path,
and structural changes that reach the store, every thread and agents sharing the block."""

from __future__ import annotations

from pathlib import Path

import pytest

from stateloop import Agent, Block
from stateloop.memory.patches import READ_ONLY_ERROR
from stateloop.memory.tool_memory import LINE_NUMBER_WARNING
from stateloop.testing import ScriptedModel, call, reply
from stateloop.tools.builtin import MEMORY_EDITS, builtin_tool

TOOLS = ["memory", "memory_apply_patch"]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agents.db'}"


def human() -> Block:
    return Block("human", "Name: Ada\nPet: cat")


async def answers(blocks: list[Block], *calls_: object,
                  **options: object) -> list[tuple[str, bool]]:
    """Run an agent that makes ``calls_`` in turn; the tool answers as (text, is_error)."""
    model = ScriptedModel([*calls_, reply("done")])
    options.setdefault("tools", TOOLS)
    options.setdefault("error_threshold", None)  # every call is made, refused or not
    agent = Agent(model=model, system="sys", blocks=blocks, **options)  # type: ignore[arg-type]
    result = await agent.run("go")
    return [(m.text, m.is_error) for m in result.messages if m.role == "tool"]


def error(text: str) -> str:
    return f"Error executing function memory: ValueError: {text}"


async def test_str_replace_answers_the_new_value_and_refuses_as_letta_does():
    block = human()
    found = await answers(
        [block],
        call("memory", command="str_replace", path="/memories/human", old_string="Pet: cat",
             new_string="Pet: dog"),
        call("memory", command="str_replace", path="human", old_string="Age",
             new_string="Age: 36"),
        call("memory", command="str_replace", path="/human", old_string="a",
             new_string="b"),
        call("memory", command="str_replace", path="/memories/human", old_string="Pet",
             new_string="1→ Pet"),
        call("memory", command="str_replace", path="/memories/human",
             old_string=LINE_NUMBER_WARNING, new_string=""),
        call("memory", command="str_replace", path="/memories/human", old_string="Pet"))
    assert found[0] == ("Name: Ada\nPet: dog", False)
    assert found[1] == (error("No replacement was performed, old_string `Age` did not appear "
                              "verbatim in memory block with label `human`."), True)
    assert found[2] == (error("No replacement was performed. Multiple occurrences of "
                              "old_string `a` in lines [1]. Please ensure it is unique."), True)
    assert found[3] == (error("new_string contains a line number prefix, which is not allowed. "
                              "Do not include line numbers when calling memory tools (line "
                              "numbers are for display purposes only)."), True)
    assert "old_string contains a line number warning" in found[4][0]
    assert found[5] == (error("Error: new_string is required for str_replace command"), True)
    assert block.value == "Name: Ada\nPet: dog"


async def test_insert_puts_lines_where_asked_and_at_the_end_by_default():
    block = human()
    found = await answers(
        [block],
        call("memory", command="insert", path="/memories/human", insert_line=0,
             insert_text="# About"),
        call("memory", command="insert", path="/memories/human", insert_text="Likes tea"),
        call("memory", command="insert", path="/memories/human", insert_line=-1,
             insert_text="City: Paris"),
        call("memory", command="insert", path="/memories/human", insert_line=9,
             insert_text="x"))
    assert found[0] == ("# About\nName: Ada\nPet: cat", False)
    assert found[2] == ("# About\nName: Ada\nPet: cat\nLikes tea\nCity: Paris", False)
    assert found[3] == (error("Invalid `insert_line` parameter: 9. It should be within the "
                              "range of lines of the memory block: [0, 5], or -1 to append to "
                              "the end of the memory block."), True)
    assert block.value == "# About\nName: Ada\nPet: cat\nLikes tea\nCity: Paris"


async def test_create_delete_rename_and_describe_change_which_blocks_the_agent_has():
    model = ScriptedModel([
        call("memory", command="create", path="/memories/coding_preferences",
             description="The user's coding preferences.", file_text="Type hints everywhere."),
        call("memory", command="create", path="/memories/empty", description="Nothing yet."),
        call("memory", command="rename", old_path="/memories/coding_preferences",
             new_path="/memories/code"),
        call("memory", command="rename", path="/memories/code",
             description="How the user writes code."),
        call("memory", command="delete", path="/memories/empty"),
        call("memory", command="rename", old_path="/memories/code", new_path="code"),
        reply("done")])
    agent = Agent(model=model, system="sys", blocks=[human()], tools=TOOLS)
    result = await agent.run("go")
    texts = [m.text for m in result.messages if m.role == "tool"]
    assert texts == [
        "Successfully created memory block 'coding_preferences'. Your system prompt has been "
        "recompiled with the new memory block and is now active in your context.",
        "Successfully created memory block 'empty'. Your system prompt has been recompiled "
        "with the new memory block and is now active in your context.",
        "Successfully renamed memory block 'coding_preferences' to 'code'. Your system prompt "
        "has been recompiled with the renamed memory block and is now active in your context.",
        "Successfully updated description of memory block 'code'. Your system prompt has been "
        "recompiled with the updated description and is now active in your context.",
        "Successfully deleted memory block 'empty'. Your system prompt has been recompiled "
        "without this memory block and is now active in your context.",
        "Successfully renamed memory block 'code' to 'code'. Your system prompt has been "
        "recompiled with the renamed memory block and is now active in your context."]
    assert [(b.label, b.value, b.description) for b in agent.blocks] == [
        ("human", "Name: Ada\nPet: cat", None),
        ("code", "Type hints everywhere.", "How the user writes code.")]
    # The model's next request already had the new block in its system prompt.
    second = model.requests[1].messages[0].text
    assert "<coding_preferences>" in second and "Type hints everywhere." in second
    assert "<code>" in agent.messages[0].text and "<empty>" not in agent.messages[0].text


async def test_structural_refusals_name_the_problem_and_change_nothing():
    persona = Block("persona", "Kind.", read_only=True)
    block = human()
    found = await answers(
        [block, persona],
        call("memory", command="create", path="/memories/human", description="again"),
        call("memory", command="create", path="/memories/new"),
        call("memory", command="create", path="/memories/bad label", description="d"),
        call("memory", command="delete", path="/memories/nope"),
        call("memory", command="delete", path="/memories/persona"),
        call("memory", command="rename", old_path="/memories/human",
             new_path="/memories/persona"),
        call("memory", command="rename", path="/memories/human"),
        call("memory", command="str_replace", path="/memories/persona", old_string="Kind.",
             new_string="Evil."),
        call("memory", command="undo", path="/memories/human"))
    assert found[0] == (error("Error: Memory block 'human' already exists"), True)
    assert found[1] == (error("Error: description is required for create command"), True)
    assert "block label 'bad label' must be letters" in found[2][0]
    assert found[3] == (error("Error: Memory block 'nope' does not exist"), True)
    assert found[4] == (error(READ_ONLY_ERROR), True)
    assert found[5] == (error("Error: Memory block 'persona' already exists"), True)
    assert found[6] == (error("Error: path and description are required for "
                              "update_description command, or old_path and new_path are "
                              "required for rename command"), True)
    assert found[7] == (error(READ_ONLY_ERROR), True)
    assert found[8] == (error("Error: Unknown command 'undo'. Supported commands: create, "
                              "str_replace, insert, delete, rename"), True)
    assert [(b.label, b.value) for b in (block, persona)] == [
        ("human", "Name: Ada\nPet: cat"), ("persona", "Kind.")]


async def test_a_nested_path_finds_the_label_with_slashes_or_underscores():
    slashed, underscored = Block("projects/web", "v1"), Block("notes_today", "a")
    found = await answers(
        [slashed, underscored],
        call("memory", command="str_replace", path="/memories/projects/web", old_string="v1",
             new_string="v2"),
        call("memory", command="insert", path="/memories/notes/today", insert_text="b"))
    assert found == [("v2", False), ("a\nb", False)]


async def test_apply_patch_to_one_block_answers_its_new_value():
    block = human()
    found = await answers(
        [block],
        call("memory_apply_patch", label="human",
             patch="*** Begin Patch\n@@\n Name: Ada\n-Pet: cat\n+Pet: dog\n*** End Patch"),
        call("memory_apply_patch", label="nobody", patch="+x"),
        call("memory_apply_patch", label="human", patch="-Pet: cow\n+Pet: owl"),
        call("memory_apply_patch", label="human", patch="@@\n 1→ Name: Ada\n+x"))
    assert found[0] == ("Name: Ada\nPet: dog", False)
    prefix = "Error executing function memory_apply_patch: ValueError: "
    assert found[1] == (prefix + "Error: Memory block 'nobody' does not exist", True)
    assert found[2][0].startswith(prefix + "Failed to apply patch: expected hunk context not "
                                  "found in the memory block.")
    assert found[3] == (prefix + "Patch contains a line number prefix, which is not allowed. "
                        "Do not include line numbers (they are for display only).", True)
    assert block.value == "Name: Ada\nPet: dog"


async def test_a_multi_block_patch_applies_whole_or_not_at_all():
    model = ScriptedModel([
        call("memory_apply_patch", label="", patch=(
            "*** Begin Patch\n*** Add Block: todo\nDescription: Open tasks\n+milk\n+eggs\n"
            "*** Update Block: human\n*** Move to: user\n@@\n-Pet: cat\n+Pet: dog\n"
            "*** Delete Block: scratch\n*** End Patch")),
        call("memory_apply_patch", label="", patch=(
            "*** Add Block: later\n+never made\n*** Update Block: todo\n-bread\n+rolls")),
        reply("done")])
    agent = Agent(model=model, system="sys", tools=TOOLS, error_threshold=None,
                  blocks=[human(), Block("scratch", "tmp")])
    result = await agent.run("go")
    tool = [m for m in result.messages if m.role == "tool"]
    assert tool[0].text == (
        "Successfully applied memory patch operations. Your system prompt has been recompiled "
        "with the updated memory contents and is now active in your context.\n\n"
        "Operations completed:\n- Created memory block 'todo'\n- Updated memory block 'human'"
        "\n- Renamed memory block 'human' to 'user'\n- Deleted memory block 'scratch'")
    assert tool[1].is_error and "expected hunk context not found" in tool[1].text
    assert [(b.label, b.value, b.description) for b in agent.blocks] == [
        ("user", "Name: Ada\nPet: dog", None), ("todo", "milk\neggs", "Open tasks")]


def test_the_new_tools_are_memory_edits_run_one_at_a_time():
    assert {"memory", "memory_apply_patch", "rethink_user_memory"} <= MEMORY_EDITS
    assert builtin_tool("memory").sequential and builtin_tool("memory_apply_patch").sequential
    schema = builtin_tool("memory").spec().parameters
    assert schema["required"] == ["command"]
    assert list(schema["properties"]) == ["command", "path", "file_text", "description",
                                          "old_string", "new_string", "insert_line",
                                          "insert_text", "old_path", "new_path"]
    assert builtin_tool("memory_apply_patch").spec().parameters["required"] == ["label", "patch"]


async def test_structural_changes_are_stored_and_reach_an_agent_sharing_the_block(db):
    first = await Agent.acreate(ScriptedModel([
        call("memory", command="create", path="/memories/plans", description="Plans.",
             file_text="Visit Rome"),
        call("memory", command="rename", old_path="/memories/team", new_path="/memories/crew"),
        call("memory", command="str_replace", path="/memories/crew", old_string="Bo",
             new_string="Cy"),
        call("memory", command="delete", path="/memories/human"),
        reply("done")]), store=db, name="first", system="sys", tools=TOOLS,
        blocks=[human(), Block("team", "Ada, Bo")])
    team = next(b for b in first.blocks if b.label == "team")
    second = await Agent.acreate(ScriptedModel([reply("seen")]), store=db, name="second",
                                 system="sys", blocks=[Block("human", "Name: Grace")])
    assert second.store is not None
    await second.store.attach_block(second.id, team.id)
    await first.run("go")
    await second.run("look")  # reads the shared block again before its step
    assert [(b.label, b.value) for b in second.blocks] == [("human", "Name: Grace"),
                                                           ("crew", "Ada, Cy")]
    assert "<crew>" in second.messages[0].text
    again = await Agent.aload("first", store=db, model=ScriptedModel([reply("x")]),
                              tools=TOOLS)
    assert [(b.label, b.value, b.description) for b in again.blocks] == [
        ("crew", "Ada, Cy", None), ("plans", "Visit Rome", "Plans.")]
    assert first.store is not None
    kept = await first.store.get_block(next(b for b in first.blocks if b.label == "crew").id)
    assert kept.label == "crew"
    detached = await first.store.list_blocks()
    assert any(b.label == "human" and b.value == "Name: Ada\nPet: cat" for b in detached)


async def test_a_conversation_creates_blocks_for_its_agent_but_keeps_isolated_ones(db):
    agent = await Agent.acreate(ScriptedModel([reply("x")]), store=db, name="threads",
                                system="sys", tools=TOOLS, blocks=[human(), Block("draft", "")])
    conversation = await agent.aconversation(isolated_block_labels=["draft"])
    conversation.model = ScriptedModel([
        call("memory", command="create", path="/memories/shared", description="For all."),
        call("memory", command="insert", path="/memories/draft", insert_text="mine"),
        call("memory", command="delete", path="/memories/draft"),
        reply("done")])
    result = await conversation.run("go")
    texts = [m.text for m in result.messages if m.role == "tool"]
    assert texts[0].startswith("Successfully created memory block 'shared'")
    assert texts[1] == "mine"
    assert "'draft' is isolated to this conversation" in texts[2]
    assert [b.label for b in agent.blocks] == ["human", "draft", "shared"]
    assert "<shared>" in agent.messages[0].text  # the agent's own thread sees it too
    assert next(b for b in agent.blocks if b.label == "draft").value == ""
