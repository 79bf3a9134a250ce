"""Core memory in the system prompt of an agent tagged ``git-memory-enabled``: Letta 0.16.8's
layout (``<self>``, nested ``<memory>`` tags, the external file tree); other agents keep
``<memory_blocks>``."""

from __future__ import annotations

import pytest

from stateloop import Agent, Block
from stateloop.testing import ScriptedModel, call, reply


def blocks() -> list[Block]:
    return [Block("system/persona", "I am Sam.\n"),
            Block("system/human", "Name: Ada", description="About the user\n"),
            Block("system/project/notes", "Ships Friday"),
            Block("notes/todo", "buy milk", description="Open tasks"),
            Block("skills/x", "Step 1: do x.", description="A skill\nsecond line"),
            Block("reference", "facts")]


GIT_MEMORY = """\
Reminder: <projection> contains the local path of the memory file projection.

<self>
<projection>$MEMORY_DIR/system/persona.md</projection>
I am Sam.
</self>

<memory>
<human>
  <projection>$MEMORY_DIR/system/human.md</projection>
  <description>About the user</description>
  Name: {name}
</human>
<project>
  <notes>
    <projection>$MEMORY_DIR/system/project/notes.md</projection>
    Ships Friday
  </notes>
</project>
<external_projection>
${{MEMORY_DIR}}/
├── notes/
│   └── todo.md
└── reference.md
</external_projection>
</memory>

<available_skills>
${{MEMORY_DIR}}/skills
└── x/
    └── SKILL.md (A skill)
</available_skills>"""


def memory_section(prompt: str) -> str:
    """What lies between the agent's instructions ("sys") and ``<memory_metadata>``."""
    assert prompt.startswith("sys\n\n")
    return prompt.removeprefix("sys\n\n").split("\n\n<memory_metadata>")[0]


async def test_tagged_agent_sees_system_blocks_in_full_and_the_rest_as_a_tree():
    model = ScriptedModel([reply("hi")])
    agent = Agent(model=model, system="sys", blocks=blocks(), tags=["git-memory-enabled"])
    await agent.run("hello")
    prompt = model.requests[0].messages[0].text
    assert memory_section(prompt) == GIT_MEMORY.format(name="Ada")
    assert "buy milk" not in prompt and "Step 1" not in prompt and "facts" not in prompt
    assert "<memory_metadata>" in prompt


@pytest.mark.parametrize("edit", [
    call("memory_replace", label="system/human", old_string="Ada", new_string="Grace"),
    call("memory", command="str_replace", path="/memories/system/human", old_string="Ada",
         new_string="Grace")])
async def test_tagged_agent_edits_a_system_block_by_its_full_label(edit):
    model = ScriptedModel([edit, reply("Hi Grace")])
    agent = Agent(model=model, system="sys", blocks=blocks(), tags=["git-memory-enabled"],
                  tools=["memory_replace", "memory"])
    result = await agent.run("I'm Grace")
    assert not any(m.is_error for m in result.messages if m.role == "tool")
    assert memory_section(model.requests[0].messages[0].text) == GIT_MEMORY.format(name="Ada")
    assert memory_section(model.requests[1].messages[0].text) == GIT_MEMORY.format(name="Grace")


async def test_letta_codes_layout_has_its_root_files_in_full():
    """With a root index (block MEMORY, Letta Code's memfs-v2), the root files are core
    memory; folders are shown as the tree, skills as skills."""
    model = ScriptedModel([reply("hi")])
    agent = Agent(model=model, system="sys", tags=["git-memory-enabled"], blocks=[
        Block("MEMORY", "# Memory\n- [human](human.md)\n"),
        Block("human", "Name: Ada", description="About the user"),
        Block("system/persona", "I am Sam."), Block("notes/todo", "buy milk"),
        Block("skills/x", "Step 1: do x.", description="A skill")])
    await agent.run("hello")
    assert memory_section(model.requests[0].messages[0].text) == """\
Reminder: <projection> contains the local path of the memory file projection.

<memory>
<MEMORY>
  <projection>$MEMORY_DIR/MEMORY.md</projection>
  # Memory
- [human](human.md)
</MEMORY>
<human>
  <projection>$MEMORY_DIR/human.md</projection>
  <description>About the user</description>
  Name: Ada
</human>
<external_projection>
${MEMORY_DIR}/
├── notes/
│   └── todo.md
└── system/
    └── persona.md
</external_projection>
</memory>

<available_skills>
${MEMORY_DIR}/skills
└── x/
    └── SKILL.md (A skill)
</available_skills>"""


async def test_tagged_agent_without_system_blocks_has_no_memory_section():
    model = ScriptedModel([reply("hi")])
    agent = Agent(model=model, system="sys", blocks=[Block("notes/todo", "buy milk")],
                  tags=["git-memory-enabled"])
    await agent.run("hello")
    assert model.requests[0].messages[0].text.startswith("sys\n\n<memory_metadata>\n")


async def test_untagged_agent_keeps_memory_blocks():
    model = ScriptedModel([reply("hi")])
    agent = Agent(model=model, system="sys", blocks=blocks()[1:2] + blocks()[3:4],
                  tags=["other"])
    await agent.run("hello")
    assert memory_section(model.requests[0].messages[0].text) == """\
<memory_blocks>
The following memory blocks are currently engaged in your core memory unit:

<system/human>
<description>
About the user

</description>
<metadata>
- chars_current=9
- chars_limit=100000
</metadata>
<value>
Name: Ada
</value>
</system/human>

<notes/todo>
<description>
Open tasks
</description>
<metadata>
- chars_current=8
- chars_limit=100000
</metadata>
<value>
buy milk
</value>
</notes/todo>

</memory_blocks>"""


async def test_adding_the_tag_recompiles_the_prompt_at_the_next_step():
    model = ScriptedModel([reply("hi"), reply("again")])
    agent = Agent(model=model, system="sys", blocks=blocks())
    await agent.run("hello")
    assert "<memory_blocks>" in model.requests[0].messages[0].text
    agent.tags = ["git-memory-enabled"]
    await agent.run("hello")
    assert memory_section(model.requests[1].messages[0].text) == GIT_MEMORY.format(name="Ada")


def test_a_stored_tagged_agent_loads_with_the_git_layout(db_url: str) -> None:
    agent = Agent(model=ScriptedModel([reply("hi")]), system="sys", blocks=blocks(),
                  tags=["git-memory-enabled"], store=db_url)
    agent.run_sync("hello")
    model = ScriptedModel([reply("again")])
    loaded = Agent.load(agent.id, store=db_url, model=model)
    assert loaded.messages[0].text == agent.messages[0].text
    loaded.run_sync("hello")
    assert memory_section(model.requests[0].messages[0].text) == GIT_MEMORY.format(name="Ada")
