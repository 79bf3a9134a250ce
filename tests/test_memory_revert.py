"""Reverting the whole memory to a commit makes it equal to that commit, as one new commit:
blocks made since are gone (deleted, unless another agent, group or identity holds them:
then only detached from this agent), blocks gone since are back, and a shared block
reverted is a commit in every agent that holds it."""

from __future__ import annotations

import pytest

from stateloop import Agent, Block
from stateloop.store import NotFoundError
from stateloop.store.records import BlockRecord
from stateloop.testing import ScriptedModel, call, reply


def agent(url: str, name: str, *script: object) -> Agent:
    return Agent(model=ScriptedModel(list(script)), system="sys", name=name, store=url,
                 tools=["memory", "memory_replace"],
                 blocks=[Block("human", f"Name: {name}")])


async def test_a_whole_revert_makes_the_memory_equal_to_the_commit(db_url: str) -> None:
    ada = agent(db_url, "ada",
                call("memory", command="create", path="/memories/notes", description="n",
                     file_text="Buy milk."),
                call("memory_replace", label="human", old_string="ada", new_string="Ann"),
                reply("ok"))
    [start] = await ada.amemory_history()
    await ada.run("go")
    notes = next(b for b in ada.blocks if b.label == "notes")
    before = await ada.amemory_history()
    sha = await ada.arevert_memory(start.sha)
    after = await ada.amemory_history()
    assert len(after) == len(before) + 1 and after[0].sha == sha
    assert after[0].message == f"Revert to {start.sha[:12]}"
    assert sorted(after[0].files_changed) == ["human.md", "notes.md"]
    assert await ada.amemory_at() == await ada.amemory_at(start.sha) == {"human": "Name: ada"}
    assert [(b.label, b.value) for b in ada.blocks] == [("human", "Name: ada")]
    assert ada.store is not None
    with pytest.raises(NotFoundError):  # made since, held by nobody else: deleted
        await ada.store.get_block(notes.id)
    assert await ada.arevert_memory(start.sha) is None  # equal already: no commit


async def test_a_shared_block_stays_with_the_agents_that_hold_it(db_url: str) -> None:
    ada, bob = agent(db_url, "ada"), agent(db_url, "bob")
    store = ada.store
    assert store is not None
    [start] = await ada.amemory_history()
    org = await store.create_block(BlockRecord(label="org", value="v1"), agent_id=ada.id)
    await store.attach_block(bob.id, org.id)
    at_org = (await ada.amemory_history())[0].sha
    team = await store.create_block(BlockRecord(label="team", value="Blue"), agent_id=ada.id)
    await store.attach_block(bob.id, team.id)
    await store.update_block(org.id, value="v2")

    await ada.arevert_memory(at_org)  # org back to v1, for bob too; team leaves ada only
    assert (await store.get_block(org.id)).value == "v1"
    assert sorted(b.label for b in await store.list_blocks(ada.id)) == ["human", "org"]
    assert (await store.get_block(team.id)).value == "Blue"
    assert sorted(b.label for b in await store.list_blocks(bob.id)) == ["human", "org", "team"]
    newest = (await bob.amemory_history())[0]
    assert newest.message == f"Revert to {at_org[:12]}"
    assert (await bob.amemory_at())["org"] == "v1"

    await ada.arevert_memory(start.sha)  # org too is ada's no more; bob keeps it
    assert [b.label for b in await store.list_blocks(ada.id)] == ["human"]
    assert (await store.get_block(org.id)).value == "v1"
    assert sorted(b.label for b in await store.list_blocks(bob.id)) == ["human", "org", "team"]
