"""MCP server records in the SQL store: unique by name, secrets kept apart from the rest."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from stateloop.store import schema
from stateloop.store.errors import DuplicateError, NotFoundError
from stateloop.store.records import new_record_id
from stateloop.store.runner import Runner

m = schema.mcp_servers

SERVER_TYPES = ("stdio", "sse", "streamable_http")


@dataclass(slots=True)
class MCPServerRecord:
    """A registered MCP server. ``config``: ``command``/``args`` (stdio) or ``server_url``/
    ``auth_header`` (HTTP); ``secrets``: ``env``, ``auth_token``, ``custom_headers``."""

    name: str
    server_type: str
    config: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: new_record_id("mcp_server"))
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


class MCPServersMixin:
    """MCP server operations of ``SqlStore``."""

    _runner: Runner

    async def create_mcp_server(self, server: MCPServerRecord) -> MCPServerRecord:
        """Store a new server; a taken name is a ``DuplicateError``."""
        _check(server)

        def txn(conn: Connection) -> MCPServerRecord:
            _ensure_name_free(conn, server.name, None)
            conn.execute(insert(m), _values(server))
            return server

        return await self._write(txn)

    async def get_mcp_server(self, id_or_name: str) -> MCPServerRecord:
        """The server with this id, or else this name."""
        return await self._runner.read(lambda conn: _load(conn, id_or_name))

    async def list_mcp_servers(self) -> list[MCPServerRecord]:
        """Every server, oldest first."""
        stmt = select(m).order_by(m.c.created_at, m.c.id)
        return await self._runner.read(
            lambda conn: [_record(row) for row in conn.execute(stmt)])

    async def update_mcp_server(self, server: MCPServerRecord) -> MCPServerRecord:
        """Replace the stored server with the same id (name, type, config and secrets)."""
        _check(server)

        def txn(conn: Connection) -> MCPServerRecord:
            _load(conn, server.id)
            _ensure_name_free(conn, server.name, server.id)
            server.updated_at = time.time()
            values = _values(server)
            del values["id"], values["created_at"]
            conn.execute(update(m).where(m.c.id == server.id).values(**values))
            return server

        return await self._write(txn)

    async def delete_mcp_server(self, id_or_name: str) -> MCPServerRecord:
        """Remove the server; returns what was stored."""

        def txn(conn: Connection) -> MCPServerRecord:
            found = _load(conn, id_or_name)
            conn.execute(delete(m).where(m.c.id == found.id))
            return found

        return await self._runner.write(txn)

    async def _write(self, txn: Any) -> MCPServerRecord:
        try:
            result: MCPServerRecord = await self._runner.write(txn)
        except IntegrityError as exc:  # a name taken by a concurrent writer
            raise DuplicateError(f"an MCP server with this name already exists: {exc.orig}"
                                 ) from exc
        return result


def _check(server: MCPServerRecord) -> None:
    if server.server_type not in SERVER_TYPES:
        raise ValueError(f"server_type must be one of {', '.join(SERVER_TYPES)}, "
                         f"not {server.server_type!r}")
    if not server.name:
        raise ValueError("server_name must not be empty")


def _ensure_name_free(conn: Connection, name: str, own_id: str | None) -> None:
    found = conn.execute(select(m.c.id).where(m.c.name == name)).scalar()
    if found is not None and found != own_id:
        raise DuplicateError(f"an MCP server named {name!r} already exists")


def _load(conn: Connection, id_or_name: str) -> MCPServerRecord:
    row = conn.execute(select(m).where(m.c.id == id_or_name)).first()
    if row is None:
        row = conn.execute(select(m).where(m.c.name == id_or_name)).first()
    if row is None:
        raise NotFoundError(f"no MCP server {id_or_name!r}")
    return _record(row)


def _record(row: Any) -> MCPServerRecord:
    return MCPServerRecord(name=row.name, server_type=row.server_type, config=dict(row.config),
                           secrets=dict(row.secrets), id=row.id, created_at=row.created_at,
                           updated_at=row.updated_at)


def _values(server: MCPServerRecord) -> dict[str, Any]:
    return {"id": server.id, "name": server.name, "server_type": server.server_type,
            "config": server.config, "secrets": server.secrets,
            "created_at": server.created_at, "updated_at": server.updated_at}
