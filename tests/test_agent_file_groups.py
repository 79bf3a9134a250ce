"""Multi-agent Agent Files: a group imports with its members and manager (ids remapped,
shared blocks shared), a sleep-time group becomes the main agent's memory agent, and
exporting the manager writes the group and its members back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from af_support import message, minimal_file, normalised
from stateloop.agent_file import export_agents, import_agents
from stateloop.sleeptime import stored_link
from stateloop.store import open_store


def _agent(file_id: str, name: str, **fields: Any) -> dict[str, Any]:
    entry = dict(minimal_file()["agents"][0])
    entry.update(id=file_id, name=name, messages=[message(f"m-{file_id}", "system", name)],
                 in_context_message_ids=[f"m-{file_id}"], **fields)
    return entry


def _group_file(manager_config: dict[str, Any]) -> dict[str, Any]:
    data = minimal_file()
    data["agents"] = [_agent("agent-0", "boss"), _agent("agent-1", "one", block_ids=[]),
                      _agent("agent-2", "two", block_ids=[])]
    data["groups"] = [{"id": "group-0", "agent_ids": ["agent-1", "agent-2"],
                       "description": "a team", "manager_config": manager_config,
                       "shared_block_ids": ["block-0"]}]
    return data


def test_a_supervisor_group_imports_with_its_members_and_exports_again(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'g.db'}"
    data = _group_file({"manager_type": "supervisor", "manager_agent_id": "agent-0"})

    async def go() -> None:
        result = await import_agents(data, store=store)
        boss, one, two = result.agent_ids
        db = await open_store(store)
        try:
            [group] = await db.list_groups(agent_id=one)
            assert group.manager_type == "supervisor" and group.manager_agent_id == boss
            assert group.agent_ids == [one, two] and group.description == "a team"
            shared = {b.id for b in await db.list_blocks(two)}
            assert set(group.shared_block_ids) <= shared  # shared with every member
        finally:
            await db.close()
        exported = await export_agents([boss], store=store)
        assert [a["name"] for a in exported["agents"]] == ["boss", "one", "two"]
        assert exported["agents"][0]["group_ids"] == ["group-0"]
        assert exported["groups"][0]["manager_config"] == {
            "manager_type": "supervisor", "manager_agent_id": "agent-0"}
        again = await import_agents(exported, store=store)
        assert normalised(await export_agents(again.agent_ids[:1], store=store)) == \
            normalised(exported)

    asyncio.run(go())


def test_a_sleeptime_group_becomes_the_main_agents_memory_agent(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    data = minimal_file()
    data["agents"] = [_agent("agent-0", "main", enable_sleeptime=True),
                      _agent("agent-1", "main-sleeptime", agent_type="sleeptime_agent")]
    data["groups"] = [{"id": "group-0", "agent_ids": ["agent-1"], "description": "",
                       "manager_config": {"manager_type": "sleeptime",
                                          "manager_agent_id": "agent-0",
                                          "sleeptime_agent_frequency": 3}}]

    async def go() -> None:
        result = await import_agents(data, store=store)
        assert not [n for n in result.notes if "sleep" in n], result.notes
        db = await open_store(store)
        try:
            link = await stored_link(db, result.agent_ids[0])
            assert link is not None and link.memory_agent_id == result.agent_ids[1]
            assert link.frequency == 3
        finally:
            await db.close()
        exported = await export_agents(result.agent_ids[:1], store=store)
        assert [a["name"] for a in exported["agents"]] == ["main", "main-sleeptime"]
        assert exported["groups"][0]["manager_config"]["manager_type"] == "sleeptime"

    asyncio.run(go())


def test_a_group_naming_an_agent_the_file_does_not_hold_is_refused(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'bad.db'}"
    data = _group_file({"manager_type": "round_robin"})
    data["groups"][0]["agent_ids"].append("agent-9")

    async def go() -> None:
        try:
            await import_agents(data, store=store)
        except ValueError as exc:
            assert "groups.0.agent_ids.2" in str(exc)
        else:
            raise AssertionError("imported")
        db = await open_store(store)
        try:
            assert await db.list_agents() == []
        finally:
            await db.close()

    asyncio.run(go())
