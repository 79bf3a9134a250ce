"""Skills: blocks ``skills/NAME`` (the files ``skills/NAME/SKILL.md``) listed in every
agent's prompt by name and description, never in full, and loaded whole when the agent
opens one with ``open_skill``; made by the library, by the agent's memory tools, or read
from a file; bounded like every block, and refused when named to reach outside."""

from __future__ import annotations

from pathlib import Path

import pytest

from stateloop import Agent, Block
from stateloop.store.memory_files import MemoryFileError, label_problem, parse, path_of
from stateloop.testing import ScriptedModel, call, reply

SKILL = "Step 1: open the form.\nStep 2: fill every field."


def pdf() -> Block:
    return Block("skills/pdf", SKILL, description="Fill PDF forms\nmore detail")


def tool_results(model: ScriptedModel, index: int) -> list[str]:
    return [m.text for m in model.requests[index].messages if m.role == "tool"]


@pytest.mark.parametrize("tags", [[], ["git-memory-enabled"]])
def test_a_skill_is_listed_by_name_and_opened_whole(tags: list[str], db_url: str) -> None:
    model = ScriptedModel([call("open_skill", name="pdf"), reply("filled")])
    agent = Agent(model=model, system="sys", tools=["open_skill"], store=db_url, tags=tags,
                  blocks=[Block("human", "Name: Ann"), pdf()])
    assert agent.run_sync("fill my form").output == "filled"
    first = model.requests[0].messages[0].text
    assert ("<available_skills>\n${MEMORY_DIR}/skills\n└── pdf/\n"
            "    └── SKILL.md (Fill PDF forms)\n</available_skills>") in first
    assert "Step 1" not in first and "more detail" not in first
    assert tool_results(model, 1) == [SKILL]  # opened: the whole body is in context


def test_a_skill_the_agent_writes_with_its_memory_tool_is_listed_and_a_file(
        db_url: str) -> None:
    model = ScriptedModel([
        call("memory", command="create", path="/memories/skills/tea",
             description="Brew tea", file_text="Boil water.\nSteep 3 minutes."),
        call("open_skill", name="${MEMORY_DIR}/skills/tea/SKILL.md"), reply("ok")])
    agent = Agent(model=model, system="sys", tools=["memory", "open_skill"], store=db_url,
                  blocks=[Block("human", "Name: Ann")])
    agent.run_sync("remember how to brew tea")
    assert "└── SKILL.md (Brew tea)" not in model.requests[0].messages[0].text
    assert "└── tea/\n    └── SKILL.md (Brew tea)" in model.requests[1].messages[0].text
    assert tool_results(model, 2)[-1] == "Boil water.\nSteep 3 minutes."
    newest = agent.memory_history()[0]
    assert newest.files_changed == ["skills/tea/SKILL.md"]
    assert agent.memory_at()["skills/tea"] == "Boil water.\nSteep 3 minutes."


def test_a_skill_file_is_an_agent_skills_skill_md() -> None:
    assert path_of("skills/pdf") == "skills/pdf/SKILL.md"
    text = "---\nname: pdf\ndescription: Fill PDF forms\n---\nStep 1."
    parsed = parse("skills/pdf/SKILL.md", text)
    assert (parsed.value, parsed.description, parsed.said) == (
        "Step 1.", "Fill PDF forms", {"description"})
    with pytest.raises(MemoryFileError, match="name must be the skill's folder name 'pdf'"):
        parse("skills/pdf/SKILL.md", "---\nname: ../../x\n---\nv")
    # any file may name itself (Letta Code's memory files do); only a skill's is fixed
    assert parse("notes.md", "---\nname: My notes\n---\nv").name == "My notes"


def test_opening_a_missing_skill_names_the_ones_there(tmp_path: object) -> None:
    model = ScriptedModel([call("open_skill", name="../../etc/passwd"), reply("ok")])
    agent = Agent(model=model, system="sys", tools=["open_skill"], blocks=[pdf()])
    agent.run_sync("go")
    (answer,) = tool_results(model, 1)
    assert "no skill named '../../etc/passwd'; available skills: pdf" in answer


@pytest.mark.parametrize("label", ["skills/../persona", "skills/a/b", "../skills/x", "/skills/x",
                                   "skills//x", "skills/x/", "skills\\x", "skills/x\x07",
                                   "skills/."])
def test_a_skill_named_to_reach_outside_is_refused_everywhere(label: str) -> None:
    assert label_problem(label) is not None
    with pytest.raises(ValueError, match="block label"):
        Block(label, "v")
    # The memory tool's paths are "/memories/LABEL": what follows is the label, whole.
    model = ScriptedModel([call("memory", command="create", path="/memories/" + label,
                                description="d"), reply("ok")])
    agent = Agent(model=model, system="sys", tools=["memory"], blocks=[Block("human")])
    agent.run_sync("go")
    assert [b.label for b in agent.blocks] == ["human"]


def test_a_skill_body_is_bounded_like_any_block() -> None:
    with pytest.raises(ValueError, match="over its limit of 100000"):
        Block("skills/big", "x" * 100_001)
    model = ScriptedModel([call("memory", command="create", path="/memories/skills/big",
                                description="d", file_text="x" * 100_001), reply("ok")])
    agent = Agent(model=model, system="sys", tools=["memory"], blocks=[Block("human")])
    agent.run_sync("go")
    assert [b.label for b in agent.blocks] == ["human"]
    assert "over its limit" in tool_results(model, 1)[0]


def test_a_letta_file_with_its_older_skill_label_imports_as_the_skill(tmp_path: Path) -> None:
    source = Agent(model=ScriptedModel([]), system="sys", blocks=[Block("human", "Ann")])
    data = source.export_file()
    data["blocks"].append({**data["blocks"][0], "id": "block-9", "label": "skills/pdf/SKILL",
                           "value": SKILL, "description": "Fill PDF forms"})
    data["agents"][0]["block_ids"].append("block-9")
    copy = Agent.import_file(data, store=f"sqlite:///{tmp_path / 'a.db'}",
                             model=ScriptedModel([]))
    assert {b.label: b.value for b in copy.blocks} == {"human": "Ann", "skills/pdf": SKILL}
