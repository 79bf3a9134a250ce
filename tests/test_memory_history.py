"""Memory history: every block change of a persisted agent is a commit in its memory
repository, kept in the store (SQLite and PostgreSQL), readable and revertible from the
library; the repository is one the real ``git`` program accepts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from dulwich.repo import Repo
from hypothesis import given
from hypothesis import strategies as st

from conftest import raw_sql as raw_rows
from stateloop import Agent, Block
from stateloop.errors import ConfigError
from stateloop.store import NotFoundError, open_store
from stateloop.store.memory_files import (
    MemoryFileError,
    indexed,
    label_of,
    parse,
    path_of,
    render,
)
from stateloop.store.memory_repo import Author, changed_by
from stateloop.store.records import AgentRecord, BlockRecord
from stateloop.testing import ScriptedModel, call, reply


def new_agent(url: str, *script: object, name: str = "ada") -> Agent:
    return Agent(model=ScriptedModel(list(script)), system="You remember.", name=name,
                 tools=["core_memory_append", "memory_replace"], store=url,
                 blocks=[Block(label="human", value="Name: Ann", description="the user"),
                         Block(label="system/persona", value="Careful.")])


def test_a_memory_tool_edit_is_a_commit_naming_the_agent_and_tool(db_url: str) -> None:
    agent = new_agent(db_url, call("core_memory_append", label="human", content="Likes tea."),
                      reply("noted"))
    agent.run_sync("I like tea")
    newest, created = agent.memory_history()
    assert (newest.author_type, newest.author_id, newest.author_name) == (
        "agent", agent.id, "core_memory_append")
    assert newest.message == "Update human"
    assert newest.files_changed == ["human.md"]
    assert (newest.additions, newest.deletions) == (1, 0)
    assert newest.parent_sha == created.sha and created.parent_sha is None
    assert created.files_changed == ["human.md", "system/persona.md"]
    assert agent.memory_at(created.sha) == {"human": "Name: Ann", "system/persona": "Careful."}
    assert agent.memory_at()["human"] == "Name: Ann\nLikes tea."
    diff = agent.memory_diff(created.sha[:8])
    assert "--- a/human.md\n+++ b/human.md\n" in diff and "+Likes tea." in diff


def test_revert_restores_the_blocks_as_a_new_commit_and_reaches_the_next_request(
        db_url: str) -> None:
    agent = new_agent(db_url, call("memory_replace", label="human", old_string="Ann",
                                   new_string="Bob"), reply("ok"), reply("again"))
    agent.run_sync("call me Bob")
    assert agent.blocks[0].value == "Name: Bob"
    first = agent.memory_history()[-1].sha
    sha = agent.revert_memory(first)
    assert sha is not None and agent.blocks[0].value == "Name: Ann"
    newest = agent.memory_history()[0]
    assert (newest.sha, newest.message, newest.author_type) == (
        sha, f"Revert to {first[:12]}", "user")
    assert agent.revert_memory(first) is None  # already so: no empty commit
    agent.run_sync("hello")
    assert "Name: Ann" in agent.model.requests[-1].messages[0].text  # type: ignore[attr-defined]
    reloaded = Agent.load(agent.id, store=db_url, model=ScriptedModel([]))
    assert reloaded.blocks[0].value == "Name: Ann"


def test_a_blocks_history_lists_only_the_commits_that_changed_it(db_url: str) -> None:
    agent = new_agent(db_url, call("core_memory_append", label="human", content="a"),
                      call("core_memory_append", label="system/persona", content="b"),
                      reply("done"))
    agent.run_sync("go")
    assert [c.message for c in agent.memory_history("system/persona")] == [
        "Update system/persona", "Create agent"]
    assert len(agent.memory_history()) == 3
    page = agent.memory_history(limit=1)
    assert len(page) == 1 and agent.memory_history(before=page[0].seq)[0].message == (
        "Update human")
    with pytest.raises(NotFoundError, match="no memory commit 'ffff'"):
        agent.memory_at("ffff")


def test_reverting_one_block_leaves_the_others(db_url: str) -> None:
    agent = new_agent(db_url, call("core_memory_append", label="human", content="a"),
                      call("core_memory_append", label="system/persona", content="b"),
                      reply("done"))
    agent.run_sync("go")
    created = agent.memory_history()[-1].sha
    agent.revert_memory(created, label="human")
    assert {b.label: b.value for b in agent.blocks} == {
        "human": "Name: Ann", "system/persona": "Careful.\nb"}


async def test_store_block_writes_are_commits_by_whoever_is_set(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        ada, bob = AgentRecord(name="ada"), AgentRecord(name="bob")
        shared = BlockRecord(label="team", value="v1")
        await store.create_agent(ada, [shared])
        await store.create_agent(bob)
        token = changed_by.set(Author("user", "key-1", "ops"))
        try:
            await store.attach_block(bob.id, shared.id)
            await store.update_block(shared.id, value="v2")  # shared: a commit in both repos
            await store.update_block(shared.id, value="v2")  # no change: no commit
            await store.detach_block(bob.id, shared.id)
            await store.update_block(shared.id, label="crew")
            extra = await store.create_block(BlockRecord(label="notes"), agent_id=ada.id)
            await store.delete_block(extra.id)
        finally:
            changed_by.reset(token)
        ada_log = await store.memory_commits(ada.id)
        bob_log = await store.memory_commits(bob.id)
        assert [c.message for c in ada_log] == [
            "Delete notes", "Add notes", "Add crew; Delete team", "Update team",
            "Create agent"]
        assert [c.message for c in bob_log] == [
            "Delete team", "Update team", "Add team", "Create agent"]
        assert {(c.author_type, c.author_id, c.author_name) for c in ada_log[:-1]} == {
            ("user", "key-1", "ops")}
        assert ada_log[-1].author_type == "system"
        _, files = await store.memory_files(ada.id)
        assert files == {"crew.md": "---\ndescription: null\n---\nv2"}
        await store.delete_agent(bob.id)  # its repository goes with it
        assert raw_rows(store, "SELECT count(*) FROM memory_commits WHERE agent_id = ?",
                        (bob.id,)) == [(0,)]
        with pytest.raises(NotFoundError):
            await store.memory_commits(bob.id)
    finally:
        await store.close()


def test_the_repository_is_one_git_accepts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    agent = new_agent(url, call("core_memory_append", label="human", content="x"), reply("k"))
    agent.run_sync("go")
    store = agent.store
    assert store is not None
    rows = raw_rows(store, "SELECT type, data FROM memory_objects WHERE agent_id = ?",
                    (agent.id,))
    head = raw_rows(store, "SELECT sha FROM memory_heads WHERE agent_id = ?", (agent.id,))
    repo = Repo.init_bare(str(tmp_path / "copy.git"), mkdir=True)
    from dulwich.objects import ShaFile

    for kind, data in rows:
        repo.object_store.add_object(ShaFile.from_raw_string(kind, bytes(data)))
    repo.refs[b"refs/heads/main"] = head[0][0].encode()
    repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/main")
    git = ["git", "-C", str(tmp_path / "copy.git")]
    subprocess.run([*git, "fsck", "--strict", "--no-dangling"], check=True,
                   capture_output=True)
    log = subprocess.run([*git, "log", "--format=%an|%ae|%s", "main"], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    assert log == [f"core_memory_append|agent:{agent.id}|Update human",
                   "stateloop|system:stateloop|Create agent"]
    shown = subprocess.run([*git, "show", "main:system/persona.md"], check=True,
                           capture_output=True, text=True).stdout
    assert shown == "---\ndescription: null\n---\nCareful."


def test_an_agent_without_a_store_has_no_history() -> None:
    agent = Agent(model=ScriptedModel([]), blocks=[Block(label="human", value="")])
    with pytest.raises(ConfigError, match="persisted agent"):
        agent.memory_history()


# --- the file format ---

def test_files_follow_lettas_format_and_paths() -> None:
    assert render("x", "v", "d", False, {}) == "---\ndescription: d\n---\nv"
    assert render("x", "v", None, True, {"k": 1}) == (
        "---\ndescription: null\nread_only: true\nmetadata:\n  k: 1\n---\nv")
    long = "What I have learned about the person I work with, " * 4  # once folded at 80
    assert render("x", "v", long, False, {}).count("\n") == 3
    assert path_of("human") == "human.md"
    assert path_of("system/persona") == "system/persona.md"
    assert path_of("skills/pdf") == "skills/pdf/SKILL.md"
    assert label_of("skills/pdf/SKILL.md") == "skills/pdf"
    assert label_of("skills/pdf/notes.md") is None and label_of("README") is None
    parsed = parse("x.md", "---\ndescription: d\nread_only: true\nlimit: 9\n---\nbody")
    assert (parsed.value, parsed.description, parsed.read_only, parsed.limit) == (
        "body", "d", True, 9)
    assert parse("x.md", "no frontmatter").value == "no frontmatter"


def test_letta_codes_layout_has_bare_indexes_and_exactly_name_and_description() -> None:
    assert indexed(["MEMORY", "human"]) and not indexed(["human", "notes/MEMORY"])
    assert render("MEMORY", "# Memory\n", "Root index", True, {"k": 1}, v2=True) == "# Memory\n"
    assert render("user-name", "Ada", "Who", True, {"k": 1}, v2=True) == (
        '---\nname: "User Name"\ndescription: "Who"\n---\nAda')
    assert render("human", "v", None, False, None, v2=True, name="Ada's") == (
        '---\nname: "Ada\'s"\ndescription: "(no description)"\n---\nv')
    # a file read back: a name is taken; the stand-in description leaves the block's alone
    parsed = parse("human.md", '---\nname: "Ada"\ndescription: "(no description)"\n---\nv')
    assert (parsed.name, parsed.description, parsed.said) == ("Ada", None, set())
    # an index is all value, frontmatter or not, in this layout (and only in it)
    assert parse("MEMORY.md", "---\ndescription: d\n---\nv", v2=True).value == (
        "---\ndescription: d\n---\nv")
    assert parse("MEMORY.md", "---\ndescription: d\n---\nv").value == "v"
    with pytest.raises(MemoryFileError, match=r"human\.md: name must be text"):
        parse("human.md", "---\nname: ''\n---\nv")


@given(st.text(max_size=60))
def test_every_description_is_one_line_and_reads_back(description: str) -> None:
    """Letta Code's hook reads frontmatter line by line: every field on one line, whatever
    the text (line breaks, quotes, YAML's own indicators, unprintable characters)."""
    for v2 in (False, True):
        text = render("notes", "v", description, False, None, v2=v2)
        head = text.split("\n---\n", 1)[0].removeprefix("---\n").split("\n")
        assert [line.split(":", 1)[0] for line in head] == (
            ["name", "description"] if v2 else ["description"])
        back = parse("notes.md", text, v2=v2).description
        assert back == (description if description.strip() or not v2 else None)


@pytest.mark.parametrize("label", ["../../etc/passwd", "a//b", ".git/config", "/abs", "a/..",
                                   "x\x00y", "", "se\\cret", "trailing."])
def test_a_label_that_is_no_safe_path_is_encoded(label: str) -> None:
    path = path_of(label)
    parts = path.split("/")
    assert all(part and part not in (".", "..") and not part.startswith(".") for part in parts)
    assert "\\" not in path and "\x00" not in path
    assert label_of(path) == label


@given(st.text(min_size=1, max_size=40))
def test_every_label_has_one_path_and_back(label: str) -> None:
    assert label_of(path_of(label)) == label


@pytest.mark.parametrize(("text", "fault"), [
    ("---\ndescription: [unclosed\n---\nv", "not valid YAML"),
    ("---\na: &x [1]\nb: *x\n---\nv", "aliases"),
    ("---\nread_only: maybe\n---\nv", "read_only must be"),
    ("---\nlimit: -1\n---\nv", "limit must be"),
    ("---\n- a list\n---\nv", "not a mapping"),
    ("---\nowner: me\n---\nv", "unknown frontmatter fields"),
    ("---\nname: [1]\n---\nv", "name must be text"),
])
def test_bad_frontmatter_is_refused_naming_the_file(text: str, fault: str) -> None:
    with pytest.raises(MemoryFileError, match=f"notes.md: .*{fault}"):
        parse("notes.md", text)


def test_an_imported_agent_file_starts_its_history(tmp_path: Path) -> None:
    source = new_agent(f"sqlite:///{tmp_path / 'a.db'}")
    exported = source.export_file()
    imported = Agent.import_file(exported, store=f"sqlite:///{tmp_path / 'b.db'}",
                                 model=ScriptedModel([]))
    history = imported.memory_history()
    assert history and history[-1].message == "Create agent"
    assert imported.memory_at() == {"human": "Name: Ann", "system/persona": "Careful."}


async def test_a_block_a_group_shares_is_a_commit_in_each_member(tmp_path: Path) -> None:
    from stateloop.store.records import GroupRecord

    store = await open_store(f"sqlite:///{tmp_path / 'g.db'}")
    try:
        ada, bob = AgentRecord(name="ada"), AgentRecord(name="bob")
        await store.create_agent(ada)
        await store.create_agent(bob)
        shared = await store.create_block(BlockRecord(label="plan", value="v"))
        group = await store.create_group(GroupRecord(agent_ids=[ada.id, bob.id],
                                                     manager_type="round_robin"))
        await store.share_group_block(group.id, shared.id, attach=True)
        for agent in (ada, bob):
            newest = (await store.memory_commits(agent.id))[0]
            assert newest.files_changed == ["plan.md"]
        await store.share_group_block(group.id, shared.id, attach=False)
        assert (await store.memory_commits(ada.id))[0].message == "Delete plan"
    finally:
        await store.close()


def test_the_memory_and_patch_tools_are_commits(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tools.db'}"
    agent = Agent(model=ScriptedModel([
        call("memory", command="create", path="/memories/notes", description="notes",
             file_text="first"),
        call("memory_apply_patch", label="human", patch="-Name: Ann\n+Name: Ann Lee"),
        reply("done")]), system="You remember.", name="ada", store=url,
        tools=["memory", "memory_apply_patch"], blocks=[Block(label="human", value="Name: Ann")])
    agent.run_sync("go")
    newest, created, *_ = agent.memory_history()
    assert (newest.author_name, newest.message) == ("memory_apply_patch", "Update human")
    assert created.message == "Add notes" and created.files_changed == ["notes.md"]
    assert agent.memory_at() == {"human": "Name: Ann Lee", "notes": "first"}


async def test_a_memory_agents_edit_is_a_commit_naming_it(tmp_path: Path) -> None:
    main_model = ScriptedModel(lambda request: reply("ok"))
    agent = await Agent.acreate(main_model, store=f"sqlite:///{tmp_path / 's.db'}",
                                name="ada", system="Chat.", enable_sleeptime=True,
                                blocks=[Block("human", "Name: Ada")],
                                sleeptime_agent_frequency=1)
    assert agent.sleeptime is not None
    agent.sleeptime.model = ScriptedModel([
        call("memory_insert", label="human", new_string="Likes tea"),
        call("memory_finish_edits")])
    await agent.run("I like tea")
    await agent.sleeptime.wait()
    memory = await agent.sleeptime.memory_agent()
    newest = (await agent.amemory_history())[0]
    assert (newest.author_type, newest.author_id, newest.author_name) == (
        "agent", memory.id, "memory_insert")
    assert (await agent.amemory_at())["human"] == "Name: Ada\nLikes tea"


@pytest.mark.parametrize(("head", "refused"), [
    ("metadata: {x: .nan}", "metadata.x: numbers must be finite"),
    ("limit: 99999999999999999999999", "limit: integers must fit in 64 bits"),
    ('description: "a\\ud800b"', "description: text holds a lone UTF-16 surrogate"),
])
def test_a_block_file_meets_the_rules_of_every_other_way_in(head: str, refused: str) -> None:
    """What YAML can say and the store cannot hold is refused, naming the field, as a
    request body or an Agent File would be."""
    with pytest.raises(MemoryFileError, match=refused):
        parse("human.md", f"---\n{head}\n---\nName: Ann")
