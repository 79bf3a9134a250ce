"""Agents, blocks and tools in the SQL store; the schema holds everything an .af carries."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import database_url
from shared_fixtures import LETTA_AF
from stateloop.store import (
    AgentRecord,
    BlockLimitError,
    BlockRecord,
    DuplicateError,
    NotFoundError,
    ToolRecord,
    open_store,
)
from stateloop.store.sql import SqlStore

FIXTURES = LETTA_AF


@pytest.fixture(params=["sqlite", "sqlite+aiosqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await open_store(database_url(request.param, tmp_path, request))
    yield s
    await s.close()


async def test_agent_crud_and_filters(store: SqlStore) -> None:
    one = await store.create_agent(AgentRecord(name="one", tags=["prod", "sales"], model="m"))
    two = await store.create_agent(AgentRecord(name="two", tags=["prod"]))
    assert (await store.get_agent("one")).id == one.id
    assert (await store.get_agent(two.id)).name == "two"
    assert [a.name for a in await store.list_agents(tags=["sales"])] == ["one"]
    assert [a.name for a in await store.list_agents(tags=["prod"])] == ["one", "two"]
    assert [a.name for a in await store.list_agents(tags=["prod", "sales"],
                                                     match_all_tags=True)] == ["one"]
    assert [a.name for a in await store.list_agents(name="two")] == ["two"]

    updated = await store.update_agent(one.id, system="new", tags=["x"],
                                       in_context_message_ids=["a", "b"])
    again = await store.get_agent(one.id)
    assert again == updated
    assert (again.system, again.tags, again.in_context_message_ids) == ("new", ["x"], ["a", "b"])

    with pytest.raises(DuplicateError, match="'one'"):
        await store.create_agent(AgentRecord(name="one"), unique_name=True)
    with pytest.raises(TypeError, match="created_at"):
        await store.update_agent(one.id, created_at=0.0)

    await store.delete_agent(one.id)
    with pytest.raises(NotFoundError, match="one"):
        await store.get_agent("one")
    assert [a.name for a in await store.list_agents()] == ["two"]


async def test_block_limit_at_creation_is_an_error_and_nothing_is_stored(
        store: SqlStore) -> None:
    too_long = BlockRecord(label="human", value="x" * 11, limit=10)
    with pytest.raises(BlockLimitError, match=r"'human'.*11 characters.*limit of 10"):
        await store.create_agent(AgentRecord(name="a"), [BlockRecord("persona", "ok"), too_long])
    assert await store.list_agents() == []
    assert await store.list_blocks() == []

    agent = await store.create_agent(AgentRecord(name="a"), [BlockRecord("human", "ok", 10)])
    with pytest.raises(BlockLimitError):
        await store.create_block(too_long, agent_id=agent.id)
    with pytest.raises(BlockLimitError):
        await store.update_agent_block(agent.id, "human", value="y" * 11)
    assert (await store.get_agent_block(agent.id, "human")).value == "ok"


async def test_missing_label_names_the_labels_the_agent_has(store: SqlStore) -> None:
    agent = await store.create_agent(AgentRecord(name="a"),
                                     [BlockRecord("human"), BlockRecord("persona")])
    with pytest.raises(NotFoundError, match=r"no block labelled 'nope'.*human, persona"):
        await store.get_agent_block(agent.id, "nope")
    with pytest.raises(NotFoundError):
        await store.update_agent_block(agent.id, "nope", value="v")


async def test_blocks_are_shared_through_the_link_table(store: SqlStore) -> None:
    shared = BlockRecord("org", "Acme")
    a = await store.create_agent(AgentRecord(name="a"), [BlockRecord("human"), shared])
    b = await store.create_agent(AgentRecord(name="b"), [BlockRecord("persona")])
    await store.attach_block(b.id, shared.id)
    await store.update_agent_block(a.id, "org", value="Acme Corp")
    assert (await store.get_agent_block(b.id, "org")).value == "Acme Corp"
    assert [x.label for x in await store.list_blocks(b.id)] == ["persona", "org"]

    with pytest.raises(DuplicateError, match="'org'"):
        await store.create_block(BlockRecord("org"), agent_id=b.id)
    await store.update_block(shared.id, label="company")
    assert (await store.get_agent_block(a.id, "company")).value == "Acme Corp"

    await store.delete_agent(a.id)  # a's own block goes, the shared one stays
    labels = sorted(x.label for x in await store.list_blocks())
    assert labels == ["company", "persona"]
    await store.detach_block(b.id, shared.id)
    with pytest.raises(NotFoundError):
        await store.detach_block(b.id, shared.id)
    assert [x.label for x in await store.list_blocks(b.id)] == ["persona"]


async def test_tools_registry(store: SqlStore) -> None:
    first = await store.upsert_tool(ToolRecord(name="add", json_schema={"name": "add"},
                                               binding="python:m:add"))
    second = await store.upsert_tool(ToolRecord(name="add", json_schema={"name": "add", "v": 2},
                                                default_requires_approval=True))
    assert second.id == first.id
    got = await store.get_tool("add")
    assert got.json_schema == {"name": "add", "v": 2}
    assert got.default_requires_approval is True
    await store.upsert_tool(ToolRecord(name="zeta"))
    assert [t.name for t in await store.list_tools()] == ["add", "zeta"]
    assert [t.name for t in await store.list_tools(["zeta"])] == ["zeta"]
    await store.delete_tool("add")
    with pytest.raises(NotFoundError, match="'add'"):
        await store.get_tool("add")


# --- .af: every field has a home ---

_AGENT_COLUMNS = {"name", "agent_type", "description", "system", "llm_config",
                  "embedding_config", "tool_rules", "tags", "metadata",
                  "in_context_message_ids", "message_buffer_autoclear", "enable_sleeptime",
                  "timezone"}
_BLOCK_COLUMNS = {"label", "value", "limit", "description", "read_only", "hidden",
                  "preserve_on_migration", "metadata"}
_TOOL_COLUMNS = {"name", "description", "tool_type", "source_type", "source_code",
                 "json_schema", "args_json_schema", "return_char_limit",
                 "default_requires_approval", "enable_parallel_execution", "tags",
                 "pip_requirements", "npm_requirements"}


def _load_af(name: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / name).read_text())
    return json.loads(data) if isinstance(data, str) else data


@pytest.mark.parametrize("fixture", ["memgpt_agent.af", "outreach_workflow_agent.af"])
async def test_af_fields_round_trip(store: SqlStore, fixture: str) -> None:
    af = _load_af(fixture)
    spec = af["agents"][0]
    values = {k: spec[k] for k in _AGENT_COLUMNS if k in spec}
    values["metadata"] = values.get("metadata") or {}
    extra = {k: v for k, v in spec.items() if k not in _AGENT_COLUMNS}
    blocks = []
    for raw in af["blocks"]:
        block_values = {k: raw[k] for k in _BLOCK_COLUMNS if k in raw}
        blocks.append(BlockRecord(**block_values,
                                  extra={k: v for k, v in raw.items() if k not in _BLOCK_COLUMNS}))
    agent = await store.create_agent(AgentRecord(**values, extra=extra), blocks)
    for raw in af["tools"]:
        tool_values = {k: raw[k] for k in _TOOL_COLUMNS if k in raw}
        await store.upsert_tool(ToolRecord(**tool_values, metadata={"af": {
            k: v for k, v in raw.items() if k not in _TOOL_COLUMNS}}))

    back = await store.get_agent(agent.id)
    rebuilt = {k: getattr(back, k) for k in _AGENT_COLUMNS} | back.extra
    rebuilt["metadata"] = rebuilt["metadata"] or spec["metadata"]
    assert rebuilt == spec
    for raw in af["blocks"]:
        stored = await store.get_agent_block(agent.id, raw["label"])
        fields = dataclasses.asdict(stored)
        assert {k: fields[k] for k in _BLOCK_COLUMNS} | stored.extra == raw
    for raw in af["tools"]:
        tool = await store.get_tool(raw["name"])
        fields = dataclasses.asdict(tool)
        assert {k: fields[k] for k in _TOOL_COLUMNS if k in raw} | tool.metadata["af"] == raw
