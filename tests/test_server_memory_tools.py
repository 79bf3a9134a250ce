"""Letta's ``memory``, ``memory_apply_patch`` and voice memory tools over letta-client: agents
created with them by name, a model that calls each, and the blocks, passages and tool
returns a Letta client reads back; a refused call answers with Letta's text and changes
nothing; a block shared by two agents changes for both."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from typing import Any

from letta_client import Letta

from fake_script import Script
from shared_fixtures import LETTA_AF
from stateloop.testing import call, reply
from test_server_support import client, fake, new_agent, script, server  # noqa: F401 (fixtures)

PATCHED = ("Successfully applied memory patch operations. Your system prompt has been "
           "recompiled with the updated memory contents and is now active in your context.")


def send(client: Letta, agent_id: str, text: str = "go") -> list[Any]:
    """The tool returns of one turn, in order."""
    response = client.agents.messages.create(agent_id, messages=[
        {"role": "user", "content": text}])
    return [m for m in response.messages if m.message_type == "tool_return_message"]


def blocks(client: Letta, agent_id: str) -> list[tuple[str, str, str | None]]:
    return [(b.label, b.value, b.description)
            for b in client.agents.blocks.list(agent_id=agent_id)]


def test_the_tools_are_listed_and_attached_by_name_with_lettas_types(client: Letta) -> None:
    agent = new_agent(client, tools=["memory", "memory_apply_patch", "store_memories",
                                     "search_memory"])
    assert sorted(t.name for t in agent.tools) == [
        "memory", "memory_apply_patch", "search_memory", "store_memories"]
    kinds = {t.name: t.tool_type for t in agent.tools}
    assert kinds["memory"] == kinds["memory_apply_patch"] == "letta_memory_core"
    assert kinds["store_memories"] == kinds["search_memory"] == "letta_voice_sleeptime_core"
    memory = next(t for t in agent.tools if t.name == "memory")
    assert memory.json_schema is not None
    assert memory.json_schema["parameters"]["required"] == ["command"]


def test_a_model_calls_each_memory_command_and_the_blocks_show_it(client: Letta,
                                                                  script: Script) -> None:
    agent = new_agent(client, tools=["memory", "memory_apply_patch"],
                      memory_blocks=[{"label": "human", "value": "Name: Ada\nPet: cat"},
                                     {"label": "scratch", "value": "tmp"}])
    script.set(
        call("memory", command="create", path="/memories/coding_preferences",
             description="The user's coding preferences.", file_text="Type hints."),
        call("memory", command="str_replace", path="/memories/human", old_string="Pet: cat",
             new_string="Pet: dog"),
        call("memory", command="insert", path="/memories/human", insert_line=0,
             insert_text="# About"),
        call("memory", command="rename", old_path="/memories/coding_preferences",
             new_path="/memories/code"),
        call("memory", command="rename", path="/memories/code",
             description="How the user writes code."),
        call("memory", command="delete", path="/memories/scratch"),
        call("memory_apply_patch", label="human", patch="@@\n-# About\n+# The user"),
        call("memory_apply_patch", label="", patch=(
            "*** Begin Patch\n*** Add Block: todo\nDescription: Open tasks\n+milk\n"
            "*** Update Block: code\n*** Move to: coding\n-Type hints.\n+Type hints; tests.\n"
            "*** End Patch")),
        reply("done"))
    returns = send(client, agent.id)
    assert [r.status for r in returns] == ["success"] * 8
    assert returns[1].tool_return == "Name: Ada\nPet: dog"
    assert returns[2].tool_return == "# About\nName: Ada\nPet: dog"
    assert returns[3].tool_return.startswith(
        "Successfully renamed memory block 'coding_preferences' to 'code'.")
    assert returns[7].tool_return == (
        PATCHED + "\n\nOperations completed:\n- Created memory block 'todo'\n"
        "- Updated memory block 'code'\n- Renamed memory block 'code' to 'coding'")
    assert blocks(client, agent.id) == [
        ("human", "# The user\nName: Ada\nPet: dog", None),
        ("coding", "Type hints; tests.", "How the user writes code."),
        ("todo", "milk", "Open tasks")]
    assert client.agents.blocks.retrieve("todo", agent_id=agent.id).description == "Open tasks"
    # The detached block is kept, as Letta keeps it.
    assert any(b.label == "scratch" for b in client.blocks.list(label="scratch"))
    script.set(reply("seen"))
    send(client, agent.id, "and now?")
    system = script.requests[-1].messages[0].text
    assert "<coding>" in system and "<todo>" in system and "<scratch>" not in system


def test_a_refused_call_answers_with_lettas_text_and_changes_nothing(client: Letta,
                                                                    script: Script) -> None:
    agent = new_agent(client, tools=["memory", "memory_apply_patch"],
                      memory_blocks=[{"label": "human", "value": "Name: Ada"}])
    script.set(
        call("memory", command="str_replace", path="/memories/human", old_string="Age",
             new_string="Age: 36"),
        reply("sorry"))
    (returned,) = send(client, agent.id)
    assert returned.status == "error"
    assert returned.tool_return == (
        "Error executing function memory: ValueError: No replacement was performed, "
        "old_string `Age` did not appear verbatim in memory block with label `human`.")
    script.set(
        call("memory_apply_patch", label="", patch=(
            "*** Add Block: never\n+made\n*** Update Block: human\n-Name: Bo\n+Name: Cy")),
        reply("sorry"))
    (returned,) = send(client, agent.id)
    assert returned.status == "error"
    assert returned.tool_return.startswith(
        "Error executing function memory_apply_patch: ValueError: Failed to apply patch: "
        "expected hunk context not found in the memory block.")
    assert blocks(client, agent.id) == [("human", "Name: Ada", None)]
    assert list(client.blocks.list(label="never")) == []


def test_a_block_shared_by_two_agents_changes_for_both(client: Letta, script: Script) -> None:
    shared = client.blocks.create(label="team", value="Ada, Bo")
    editor = new_agent(client, tools=["memory", "memory_apply_patch"])
    reader = new_agent(client)
    for agent in (editor, reader):
        client.agents.blocks.attach(shared.id, agent_id=agent.id)
    script.set(reply("hello"))
    send(client, reader.id, "hi")  # the reader is live before the edit
    script.set(
        call("memory", command="str_replace", path="/memories/team", old_string="Bo",
             new_string="Cy"),
        call("memory_apply_patch", label="team", patch="+Dee"),
        call("memory", command="rename", old_path="/memories/team", new_path="/memories/crew"),
        reply("done"))
    assert [r.status for r in send(client, editor.id)] == ["success"] * 3
    for agent in (editor, reader):
        block = client.agents.blocks.retrieve("crew", agent_id=agent.id)
        assert (block.id, block.value) == (shared.id, "Ada, Cy\nDee")
    script.set(reply("seen"))
    send(client, reader.id, "who is in the team?")
    system = script.requests[-1].messages[0].text
    assert "<crew>" in system and "Ada, Cy\nDee" in system


def test_the_voice_tools_file_search_and_rewrite_memory(client: Letta, script: Script) -> None:
    agent = new_agent(client, tools=["store_memories", "search_memory", "rethink_user_memory",
                                     "finish_rethinking_memory"],
                      memory_blocks=[{"label": "human", "value": "Name: Ada"}])
    script.set(
        call("store_memories", chunks=[
            {"start_index": 0, "end_index": 1, "context": "Ada's order is 4417."}]),
        call("rethink_user_memory", new_memory="Name: Ada\nOrder: 4417"),
        call("finish_rethinking_memory"),
        reply("noted"))
    returns = send(client, agent.id, "my order id is 4417\nplease ship it to Lyon")
    assert [(r.status, r.tool_return) for r in returns] == [("success", "")] * 3
    (passage,) = client.agents.passages.list(agent.id)
    assert passage.text == (
        "<memory><messages><message>my order id is 4417</message><message>please ship it to "
        "Lyon</message></messages><context>Ada's order is 4417.</context></memory>")
    assert blocks(client, agent.id) == [("human", "Name: Ada\nOrder: 4417", None)]
    script.set(call("search_memory", convo_keyword_queries=["Lyon"], start_minutes_ago=None,
                    end_minutes_ago=None), reply("found"))
    (returned,) = send(client, agent.id, "where does order 4417 go?")
    found = json.loads(returned.tool_return)
    assert [r["content"] for r in found["archival_search_results"]] == [passage.text]
    assert found["convo_keyword_search_results"] == {
        "Lyon": ["my order id is 4417\nplease ship it to Lyon"]}


def test_an_agent_file_with_these_tools_imports_with_them_attached(client: Letta,
                                                                   script: Script) -> None:
    exported = json.loads(json.loads((LETTA_AF / "memgpt_agent.af").read_text()))
    kinds = {"memory": "letta_memory_core", "memory_apply_patch": "letta_memory_core",
             "store_memories": "letta_voice_sleeptime_core",
             "search_memory": "letta_voice_sleeptime_core"}
    template = exported["tools"][0]
    exported["tools"] = [
        {**template, "id": f"tool-{n}", "name": name, "tool_type": kind, "tags": [kind],
         "source_code": f"def {name}(**kwargs):\n    raise NotImplementedError\n",
         "json_schema": {"name": name, "parameters": {"type": "object", "properties": {}}}}
        for n, (name, kind) in enumerate(kinds.items())]
    exported["agents"][0]["tool_ids"] = [tool["id"] for tool in exported["tools"]]
    exported["agents"][0]["tool_rules"] = []
    [agent_id] = client.agents.import_file(
        file=("agent.af", json.dumps(exported).encode())).agent_ids  # type: ignore[arg-type]
    agent = client.agents.retrieve(agent_id, include=["agent.tools"])
    assert sorted(t.name for t in agent.tools) == sorted(kinds)
    assert {t.name: t.tool_type for t in agent.tools} == kinds
    script.set(call("memory", command="create", path="/memories/imported",
                    description="Made after import.", file_text="It works."),
               call("memory_apply_patch", label="imported", patch="-It works.\n+It still works."),
               reply("done"))
    assert [r.status for r in send(client, agent_id)] == ["success", "success"]
    assert client.agents.blocks.retrieve("imported", agent_id=agent_id).value == "It still works."
