"""The tool registry of ``SqlStore``: tools stored by name, with their source and schema."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from sqlalchemy import Connection, delete, insert, or_, select, update

from stateloop.store import rows, schema
from stateloop.store.errors import NotFoundError
from stateloop.store.records import ToolRecord
from stateloop.store.runner import Runner

t = schema.tools


class ToolRegistryMixin:
    """Tool operations of ``SqlStore``."""

    _runner: Runner

    async def upsert_tool(self, tool: ToolRecord) -> ToolRecord:
        """Register a tool by name, replacing an earlier one of that name (its id is kept)."""

        def txn(conn: Connection) -> ToolRecord:
            old = conn.execute(select(t.c.id, t.c.created_at).where(t.c.name == tool.name)).first()
            if old is None:
                conn.execute(insert(t), rows.tool_values(tool))
                return tool
            new = dataclasses.replace(tool, id=old.id, created_at=old.created_at,
                                      updated_at=time.time())
            values = rows.tool_values(new)
            conn.execute(update(t).where(t.c.id == old.id).values(**values))
            return new

        return await self._runner.write(txn)

    async def get_tool(self, name_or_id: str) -> ToolRecord:
        """The tool with this name or id."""

        def txn(conn: Connection) -> ToolRecord:
            row = conn.execute(select(t).where(or_(t.c.name == name_or_id,
                                                   t.c.id == name_or_id))).first()
            if row is None:
                raise NotFoundError(f"no tool named {name_or_id!r}")
            return rows.tool_from_row(row)

        return await self._runner.read(txn)

    async def list_tools(self, names: Sequence[str] | None = None) -> list[ToolRecord]:
        """Registered tools by name order, optionally only these names."""
        stmt = select(t).order_by(t.c.name)
        if names is not None:
            stmt = stmt.where(t.c.name.in_(list(names)))
        return await self._runner.read(
            lambda conn: [rows.tool_from_row(row) for row in conn.execute(stmt)])

    async def delete_tool(self, name: str) -> None:
        """Remove a tool from the registry."""

        def txn(conn: Connection) -> None:
            if not conn.execute(delete(t).where(t.c.name == name)).rowcount:
                raise NotFoundError(f"no tool named {name!r}")

        await self._runner.write(txn)
