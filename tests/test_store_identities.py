"""Identities in the SQL store: Letta's create, upsert, modify and delete semantics, their links
to agents and blocks, and one end user's block shared by two agents through an identity."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conftest import DIALECTS, database_url
from stateloop import Agent
from stateloop.store import (
    AgentRecord,
    BlockRecord,
    DuplicateError,
    IdentityRecord,
    NotFoundError,
    open_store,
)
from stateloop.store.sql import SqlStore
from stateloop.testing import ScriptedModel, call, reply


@pytest.fixture(params=DIALECTS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await open_store(database_url(request.param, tmp_path, request))
    yield s
    await s.close()


def prop(key: str, value: object, kind: str = "string") -> dict[str, object]:
    return {"key": key, "value": value, "type": kind}


async def test_create_get_list_filters_and_count(store: SqlStore) -> None:
    ada = await store.create_identity(IdentityRecord("ada", "Ada Lovelace",
                                                     properties=[prop("plan", "pro")]))
    await store.create_identity(IdentityRecord("acme", "ACME", identity_type="org"))
    await store.create_identity(IdentityRecord("ada", "Ada in beta", project_id="beta"))
    assert await store.get_identity(ada.id) == ada
    assert ada.properties == [prop("plan", "pro")] and ada.agent_ids == []
    assert await store.count_identities() == 3
    assert [x.name for x in await store.list_identities(name="ADA")] == [
        "Ada Lovelace", "Ada in beta"]
    assert [x.name for x in await store.list_identities(identity_type="org")] == ["ACME"]
    assert [x.project_id for x in await store.list_identities(identifier_key="ada")] == [
        None, "beta"]
    assert [x.name for x in await store.list_identities(project_id="beta")] == ["Ada in beta"]


async def test_a_taken_key_or_an_unknown_link_stores_nothing(store: SqlStore) -> None:
    await store.create_identity(IdentityRecord("ada", "Ada"))
    with pytest.raises(DuplicateError, match="'ada'"):
        await store.create_identity(IdentityRecord("ada", "Another Ada"))
    with pytest.raises(NotFoundError, match="agent-nope"):
        await store.create_identity(IdentityRecord("bob", "Bob", agent_ids=["agent-nope"]))
    with pytest.raises(ValueError, match="identity_type"):
        await store.create_identity(IdentityRecord("eve", "Eve", identity_type="robot"))
    with pytest.raises(ValueError, match="type must be"):
        await store.create_identity(IdentityRecord("eve", "Eve",
                                                   properties=[prop("x", 1, "integer")]))
    assert [x.identifier_key for x in await store.list_identities()] == ["ada"]


async def test_upsert_replaces_and_modify_merges(store: SqlStore) -> None:
    agent = await store.create_agent(AgentRecord(name="a"))
    other = await store.create_agent(AgentRecord(name="b"))
    first = await store.upsert_identity(IdentityRecord(
        "ada", "Ada", properties=[prop("plan", "pro"), prop("age", 36, "number")],
        agent_ids=[agent.id]))
    again = await store.upsert_identity(IdentityRecord(
        "ada", "Ada L.", identity_type="other", properties=[prop("plan", "free")]))
    assert again.id == first.id and await store.count_identities() == 1
    assert (again.name, again.identity_type) == ("Ada L.", "other")
    assert again.properties == [prop("plan", "free")]  # replaced
    assert again.agent_ids == [agent.id]  # no agent_ids given: links stay

    changed = await store.update_identity(
        first.id, name="Ada King", properties=[prop("vip", True, "boolean")],
        agent_ids=[other.id])
    assert changed.name == "Ada King"
    assert changed.properties == [prop("plan", "free"), prop("vip", True, "boolean")]
    assert changed.agent_ids == [agent.id, other.id]  # linked besides
    replaced = await store.set_identity_properties(first.id, [prop("tier", {"a": 1}, "json")])
    assert replaced.properties == [prop("tier", {"a": 1}, "json")]

    await store.create_identity(IdentityRecord("bob", "Bob"))
    with pytest.raises(DuplicateError, match="'bob'"):
        await store.update_identity(first.id, identifier_key="bob")
    with pytest.raises(NotFoundError, match="identity-nope"):
        await store.update_identity("identity-nope", name="x")
    assert (await store.get_identity(first.id)).identifier_key == "ada"


async def test_links_and_deletes(store: SqlStore) -> None:
    one = await store.create_agent(AgentRecord(name="one"))
    two = await store.create_agent(AgentRecord(name="two"))
    lone = await store.create_agent(AgentRecord(name="lone"))
    block = await store.create_block(BlockRecord("human", "Ada"))
    ada = await store.create_identity(IdentityRecord("ada", "Ada"))
    bob = await store.create_identity(IdentityRecord("bob", "Bob"))
    for agent in (one, two):
        await store.attach_identity(ada.id, agent_id=agent.id)
    await store.attach_identity(ada.id, agent_id=one.id)  # twice: still one link
    await store.attach_identity(ada.id, block_id=block.id)
    await store.set_agent_identities(lone.id, [bob.id])

    assert (await store.get_identity(ada.id)).agent_ids == [one.id, two.id]
    assert await store.identified_ids("agent", identity_id=ada.id) == {one.id, two.id}
    assert await store.identified_ids("agent", identifier_keys=["bob"]) == {lone.id}
    assert await store.identified_ids("block", identifier_keys=["ada", "bob"]) == {block.id}
    shown = await store.agents_identities([one.id, lone.id])
    assert {k: [x.id for x in v] for k, v in shown.items()} == {one.id: [ada.id],
                                                                lone.id: [bob.id]}
    with pytest.raises(NotFoundError, match="block-nope"):
        await store.attach_identity(ada.id, block_id="block-nope")
    with pytest.raises(NotFoundError, match="identity-nope"):
        await store.set_agent_identities(lone.id, [bob.id, "identity-nope"])
    assert (await store.get_identity(bob.id)).agent_ids == [lone.id]

    await store.detach_identity(ada.id, agent_id=two.id)
    await store.detach_identity(ada.id, agent_id=two.id)  # not linked: nothing changes
    await store.delete_agent(one.id)
    assert (await store.get_identity(ada.id)).agent_ids == []
    assert await store.identified_ids("agent", identity_id=ada.id) == set()  # links cascade
    await store.delete_identity(ada.id)  # its agents and blocks stay
    assert (await store.get_block(block.id)).value == "Ada"
    assert (await store.get_agent(two.id)).name == "two"
    assert await store.identified_ids("block", identity_id=ada.id) == set()
    with pytest.raises(NotFoundError):
        await store.delete_identity(ada.id)


async def test_an_identitys_block_is_shared_by_its_agents(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'shared.db'}"
    writer = await Agent.acreate(
        ScriptedModel([call("memory_replace", label="human", old_string="tea",
                            new_string="coffee"), reply("noted")]),
        store=db, name="writer", tools=["memory_replace"])
    reader_model = ScriptedModel([reply("tea"), reply("coffee")])
    reader = await Agent.acreate(reader_model, store=db, name="reader")
    store = writer.store
    assert store is not None
    block = await store.create_block(BlockRecord("human", "Ada drinks tea"))
    ada = await store.create_identity(IdentityRecord("ada", "Ada", block_ids=[block.id]))
    for agent in (writer, reader):
        await store.attach_identity(ada.id, agent_id=agent.id)
    # Each agent the end user talks to gets the end user's blocks.
    identity = await store.get_identity(ada.id)
    for agent_id in identity.agent_ids:
        for block_id in identity.block_ids:
            await store.attach_block(agent_id, block_id)

    await reader.run("What does Ada drink?")
    assert "Ada drinks tea" in reader_model.requests[0].messages[0].text
    await writer.run("Ada switched to coffee")
    await reader.run("And now?")
    assert "Ada drinks coffee" in reader_model.requests[1].messages[0].text
    assert [b.value for b in writer.blocks] == ["Ada drinks coffee"]

    # An edit made while an agent is not loaded is in its prompt once it is.
    await store.update_block(block.id, value="Ada drinks water")
    later = ScriptedModel([reply("water")])
    await (await Agent.aload("reader", store=db, model=later)).run("Now?")
    assert "Ada drinks water" in later.requests[0].messages[0].text
