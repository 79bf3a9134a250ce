"""The tool registry of ``SqlStore``: tools stored by name, with their source and schema."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, or_, select, update

from stateloop.store import rows, schema
from stateloop.store.dialect import upsert
from stateloop.store.errors import DuplicateError, NotFoundError
from stateloop.store.paging import keyset
from stateloop.store.records import EVERYTHING, Page, ToolRecord
from stateloop.store.runner import Runner

t = schema.tools
a = schema.agents


class ToolRegistryMixin:
    """Tool operations of ``SqlStore``."""

    _runner: Runner

    async def upsert_tool(self, tool: ToolRecord) -> ToolRecord:
        """Register a tool by name, replacing an earlier one of that name (its id is kept)."""

        def txn(conn: Connection) -> ToolRecord:
            new = dataclasses.replace(tool, updated_at=time.time())
            kept = upsert(conn, t, rows.tool_values(new), "name", ("id", "created_at"))
            return dataclasses.replace(new, id=kept.id, created_at=kept.created_at)

        return await self._runner.write(txn)

    async def rename_tool(self, old_name: str, tool: ToolRecord) -> ToolRecord:
        """Store ``tool`` (the one named ``old_name``, renamed) under its new name; agents
        with the tool, and their tool rules, name it anew. A ``DuplicateError`` when
        another tool has that name."""

        def txn(conn: Connection) -> ToolRecord:
            old = conn.execute(select(t.c.id, t.c.created_at).where(t.c.name == old_name)).first()
            if old is None:
                raise NotFoundError(f"no tool named {old_name!r}")
            if conn.execute(select(t.c.id).where(t.c.name == tool.name)).first() is not None:
                raise DuplicateError(f"a tool named {tool.name!r} already exists")
            new = dataclasses.replace(tool, id=old.id, created_at=old.created_at,
                                      updated_at=time.time())
            conn.execute(update(t).where(t.c.id == old.id).values(**rows.tool_values(new)))
            for row in conn.execute(select(a.c.id, a.c.tool_names, a.c.tool_rules)).all():
                if old_name not in row.tool_names:
                    continue
                rules = [_renamed(r, old_name, tool.name) for r in row.tool_rules]
                names = [tool.name if n == old_name else n for n in row.tool_names]
                conn.execute(update(a).where(a.c.id == row.id).values(
                    tool_names=names, tool_rules=rules))
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

    async def list_tools(self, names: Sequence[str] | None = None, *,
                         page: Page = EVERYTHING) -> list[ToolRecord]:
        """Registered tools on ``page`` of the name order (default: all), optionally only
        these names, read in SQL."""
        stmt = select(t)
        if names is not None:
            stmt = stmt.where(t.c.name.in_(list(names)))
        return await self._runner.read(lambda conn: [
            rows.tool_from_row(row)
            for row in conn.execute(keyset(conn, stmt, t, page, key=(t.c.name, t.c.id)))])

    async def agent_tools(self, agent_id: str, page: Page = EVERYTHING) -> list[ToolRecord]:
        """The agent's tools on ``page`` (default: all) of its attach order (cursors are tool
        ids); only the page's tools are read. A name no registered tool has is skipped."""

        def txn(conn: Connection) -> list[ToolRecord]:
            names = conn.execute(select(a.c.tool_names).where(a.c.id == agent_id)).scalar()
            if names is None:
                raise NotFoundError(f"agent with id {agent_id!r} not found")
            ordered = list(names) if page.order == "asc" else list(reversed(names))
            start, stop = 0, len(ordered)
            for cursor, after in ((page.after, True), (page.before, False)):
                name = None if cursor is None else conn.execute(
                    select(t.c.name).where(t.c.id == cursor)).scalar()
                if name in ordered:
                    if after:
                        start = ordered.index(name) + 1
                    else:
                        stop = ordered.index(name)
            chosen = ordered[start:stop]
            found: dict[str, ToolRecord] = {}
            size = page.limit if page.limit is not None else len(chosen)
            while chosen and len(found) < size:  # a missing name: read on to fill the page
                wanted, chosen = chosen[:size - len(found)], chosen[size - len(found):]
                by_name = {row.name: rows.tool_from_row(row) for row in conn.execute(
                    select(t).where(t.c.name.in_(wanted)))}
                found.update((n, by_name[n]) for n in wanted if n in by_name)
            return list(found.values())

        return await self._runner.read(txn)

    async def count_tools(self, *, names: Sequence[str] = (), ids: Sequence[str] = (),
                          search: str | None = None, types: Sequence[str] = (),
                          exclude_types: Sequence[str] = (), letta_only: bool = False,
                          exclude_letta: bool = False) -> int:
        """How many tools match every filter given (``search``: a part of the name, any
        case; Letta's own tools are those whose type starts ``letta_``), counted in SQL."""
        stmt = select(func.count()).select_from(t)
        if names:
            stmt = stmt.where(t.c.name.in_(list(names)))
        if ids:
            stmt = stmt.where(t.c.id.in_(list(ids)))
        if search:
            stmt = stmt.where(func.lower(t.c.name).contains(search.lower(), autoescape=True))
        if types:
            stmt = stmt.where(t.c.tool_type.in_(list(types)))
        if exclude_types:
            stmt = stmt.where(t.c.tool_type.not_in(list(exclude_types)))
        letta = t.c.tool_type.startswith("letta_", autoescape=True)
        if letta_only:
            stmt = stmt.where(letta)
        if exclude_letta:
            stmt = stmt.where(~letta)
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))

    async def delete_tool(self, name: str) -> None:
        """Remove a tool from the registry."""

        def txn(conn: Connection) -> None:
            if not conn.execute(delete(t).where(t.c.name == name)).rowcount:
                raise NotFoundError(f"no tool named {name!r}")

        await self._runner.write(txn)


def _renamed(rule: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """A tool rule (as stored) with the tool ``old`` named ``new`` wherever it names it."""
    def name(value: Any) -> Any:
        return new if value == old else value

    rule = {**rule, "tool_name": name(rule.get("tool_name"))}
    if isinstance(rule.get("children"), list):
        rule["children"] = [name(c) for c in rule["children"]]
    if rule.get("default_child") is not None:
        rule["default_child"] = name(rule["default_child"])
    if isinstance(rule.get("child_output_mapping"), dict):
        rule["child_output_mapping"] = {k: name(v)
                                        for k, v in rule["child_output_mapping"].items()}
    return rule
