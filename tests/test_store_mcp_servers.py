"""MCP server records in the SQL store: unique names, found by id or name, updated whole,
secrets kept apart from the rest, and clear errors for unknown ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stateloop.store import DuplicateError, NotFoundError, open_store
from stateloop.store.mcp_servers import MCPServerRecord
from stateloop.store.sql import SqlStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await open_store(f"sqlite:///{tmp_path / 'mcp.db'}")
    yield s
    await s.close()


def stdio(name: str) -> MCPServerRecord:
    return MCPServerRecord(name, "stdio", config={"command": "mcp-files", "args": ["."]},
                           secrets={"env": {"TOKEN": "t"}})


async def test_create_find_update_delete(store: SqlStore) -> None:
    created = await store.create_mcp_server(stdio("files"))
    assert created.id.startswith("mcp_server-")
    assert (await store.get_mcp_server("files")).id == created.id
    found = await store.get_mcp_server(created.id)
    assert found.config == {"command": "mcp-files", "args": ["."]}
    assert found.secrets == {"env": {"TOKEN": "t"}}

    found.name, found.secrets = "files2", {"env": {"TOKEN": "u"}}
    await store.update_mcp_server(found)
    again = await store.get_mcp_server(created.id)
    assert (again.name, again.secrets, again.created_at) == (
        "files2", {"env": {"TOKEN": "u"}}, created.created_at)
    assert [s.name for s in await store.list_mcp_servers()] == ["files2"]

    assert (await store.delete_mcp_server("files2")).id == created.id
    assert await store.list_mcp_servers() == []


async def test_names_are_unique_and_unknown_servers_are_named(store: SqlStore) -> None:
    first = await store.create_mcp_server(stdio("files"))
    with pytest.raises(DuplicateError, match="'files'"):
        await store.create_mcp_server(stdio("files"))
    other = await store.create_mcp_server(stdio("other"))
    other.name = "files"
    with pytest.raises(DuplicateError, match="'files'"):
        await store.update_mcp_server(other)
    assert (await store.get_mcp_server(other.id)).name == "other"  # nothing half-stored
    with pytest.raises(NotFoundError, match="nope"):
        await store.get_mcp_server("nope")
    with pytest.raises(NotFoundError):
        await store.delete_mcp_server("nope")
    with pytest.raises(ValueError, match="server_type"):
        await store.create_mcp_server(MCPServerRecord("x", "websocket"))
    assert [s.id for s in await store.list_mcp_servers()] == [first.id, other.id]
