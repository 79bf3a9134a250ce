"""Identities in the SQL store (Letta's semantics): who agents and blocks belong to, unique by
``identifier_key`` within a project, linked to any number of agents and blocks.

Deleting an identity removes its links only; its agents and blocks stay. Deleting an agent
or a block removes its links (the foreign keys cascade).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Table, delete, func, insert, select, update

from stateloop.store import schema
from stateloop.store.errors import DuplicateError, NotFoundError
from stateloop.store.paging import keyset
from stateloop.store.projects import acting_project
from stateloop.store.records import (
    EVERYTHING,
    IDENTITY_TYPES,
    PROPERTY_TYPES,
    IdentityRecord,
    Page,
)
from stateloop.store.runner import Runner

i, ia, ib = schema.identities, schema.identities_agents, schema.identities_blocks
a, b = schema.agents, schema.blocks

_MUTABLE = frozenset({"identifier_key", "name", "identity_type", "properties"})


class IdentitiesMixin:
    """Identity records and their links to agents and blocks, for ``SqlStore``."""

    _runner: Runner

    async def create_identity(self, identity: IdentityRecord) -> IdentityRecord:
        """Store a new identity linked to its ``agent_ids`` and ``block_ids``; a taken
        ``identifier_key`` in its project is a ``DuplicateError``, an unknown id a
        ``NotFoundError``, and then nothing is stored."""
        _check(identity.identity_type, identity.properties)

        def txn(conn: Connection) -> IdentityRecord:
            _ensure_key_free(conn, identity.identifier_key, identity.project_id)
            conn.execute(insert(i), _values(identity))
            _link(conn, identity.id, "agent", identity.agent_ids, replace=True)
            _link(conn, identity.id, "block", identity.block_ids, replace=True)
            return _load(conn, identity.id)

        return await self._runner.write(txn)

    async def upsert_identity(self, identity: IdentityRecord) -> IdentityRecord:
        """Create the identity, or replace the one with its ``identifier_key`` and project:
        name, type and properties are replaced; its links too when ``agent_ids`` or
        ``block_ids`` are non-empty."""
        _check(identity.identity_type, identity.properties)

        def txn(conn: Connection) -> IdentityRecord:
            found = conn.execute(select(i.c.id).where(_same_key(identity.identifier_key,
                                                                 identity.project_id))).scalar()
            if found is None:
                conn.execute(insert(i), _values(identity))
                found = identity.id
            else:
                conn.execute(update(i).where(i.c.id == found).values(
                    name=identity.name, identity_type=identity.identity_type,
                    properties=list(identity.properties), updated_at=time.time()))
            for kind, ids in (("agent", identity.agent_ids), ("block", identity.block_ids)):
                if ids:
                    _link(conn, found, kind, ids, replace=True)
            return _load(conn, found)

        return await self._runner.write(txn)

    async def get_identity(self, identity_id: str) -> IdentityRecord:
        """The identity with this id, with its agents and blocks."""
        return await self._runner.read(lambda conn: _load(conn, identity_id))

    async def check_identity(self, identity_id: str) -> None:
        """A ``NotFoundError`` unless an identity has this id; reads its id only (not its
        agents and blocks, which may be many)."""
        stmt = select(i.c.id).where(i.c.id == identity_id)
        if await self._runner.read(lambda conn: conn.execute(stmt).first()) is None:
            raise NotFoundError(f"no identity with id {identity_id!r}")

    async def list_identities(self, *, name: str | None = None, project_id: str | None = None,
                              identifier_key: str | None = None,
                              identity_type: str | None = None,
                              page: Page = EVERYTHING) -> list[IdentityRecord]:
        """Identities on ``page`` (default: all, oldest first), read in SQL: ``name`` is a
        part of the name in any case, the other filters exact."""
        stmt = select(i.c.id)
        if (project := acting_project.get()) is not None:
            stmt = stmt.where(i.c.project == project)
        if name:
            stmt = stmt.where(func.lower(i.c.name).contains(name.lower(), autoescape=True))
        for column, value in ((i.c.project_id, project_id),
                              (i.c.identifier_key, identifier_key),
                              (i.c.identity_type, identity_type)):
            if value is not None:
                stmt = stmt.where(column == value)
        def txn(conn: Connection) -> list[IdentityRecord]:
            ids = list(conn.execute(keyset(conn, stmt, i, page)).scalars())
            loaded = _load_many(conn, ids)
            return [loaded[identity_id] for identity_id in ids]

        return await self._runner.read(txn)

    async def count_identities(self) -> int:
        """How many identities there are."""
        stmt = select(func.count()).select_from(i)
        if (project := acting_project.get()) is not None:
            stmt = stmt.where(i.c.project == project)
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))

    async def update_identity(self, identity_id: str, *, agent_ids: Sequence[str] = (),
                              block_ids: Sequence[str] = (), **changes: Any) -> IdentityRecord:
        """Letta's modify: the given fields change, ``properties`` are merged by key, and
        ``agent_ids``/``block_ids`` are linked besides the ones already linked."""
        unknown = set(changes) - _MUTABLE
        if unknown:
            raise TypeError(f"update_identity: unknown or read-only fields {sorted(unknown)}")
        _check(changes.get("identity_type", IDENTITY_TYPES[0]), changes.get("properties", []))

        def txn(conn: Connection) -> IdentityRecord:
            current = _load(conn, identity_id)
            values = dict(changes)
            if "properties" in values:
                merged = {p["key"]: p for p in current.properties}
                merged.update({p["key"]: p for p in values["properties"]})
                values["properties"] = list(merged.values())
            key = values.get("identifier_key", current.identifier_key)
            if key != current.identifier_key:
                _ensure_key_free(conn, key, current.project_id)
            conn.execute(update(i).where(i.c.id == identity_id)
                         .values(**values, updated_at=time.time()))
            _link(conn, identity_id, "agent", agent_ids, replace=False)
            _link(conn, identity_id, "block", block_ids, replace=False)
            return _load(conn, identity_id)

        return await self._runner.write(txn)

    async def set_identity_properties(self, identity_id: str,
                                      properties: list[dict[str, Any]]) -> IdentityRecord:
        """Replace the identity's properties (Letta's "upsert properties" replaces them)."""
        _check(IDENTITY_TYPES[0], properties)

        def txn(conn: Connection) -> IdentityRecord:
            _load(conn, identity_id)
            conn.execute(update(i).where(i.c.id == identity_id)
                         .values(properties=list(properties), updated_at=time.time()))
            return _load(conn, identity_id)

        return await self._runner.write(txn)

    async def delete_identity(self, identity_id: str) -> None:
        """Delete the identity and its links; its agents and blocks stay."""

        def txn(conn: Connection) -> None:
            if not conn.execute(delete(i).where(i.c.id == identity_id)).rowcount:
                raise NotFoundError(f"no identity with id {identity_id!r}")

        await self._runner.write(txn)

    async def attach_identity(self, identity_id: str, *, agent_id: str | None = None,
                              block_id: str | None = None) -> None:
        """Link the identity to an agent and/or a block (already linked: nothing changes)."""
        await self._runner.write(lambda conn: _relink(conn, identity_id, agent_id, block_id,
                                                      attach=True))

    async def detach_identity(self, identity_id: str, *, agent_id: str | None = None,
                              block_id: str | None = None) -> None:
        """Unlink the identity from an agent and/or a block (not linked: nothing changes)."""
        await self._runner.write(lambda conn: _relink(conn, identity_id, agent_id, block_id,
                                                      attach=False))

    async def set_agent_identities(self, agent_id: str, identity_ids: Sequence[str]) -> None:
        """Make these the agent's identities (Letta's ``identity_ids`` on create and modify)."""

        def txn(conn: Connection) -> None:
            _require(conn, a, agent_id, "agent")
            for identity_id in identity_ids:
                _require(conn, i, identity_id, "identity")
            conn.execute(delete(ia).where(ia.c.agent_id == agent_id))
            if identity_ids:
                conn.execute(insert(ia), [{"identity_id": found, "agent_id": agent_id}
                                          for found in dict.fromkeys(identity_ids)])

        await self._runner.write(txn)

    async def check_identities(self, identity_ids: Iterable[str]) -> None:
        """``NotFoundError`` naming the first id that is no identity's."""

        def txn(conn: Connection) -> None:
            for identity_id in identity_ids:
                _require(conn, i, identity_id, "identity")

        await self._runner.read(txn)

    async def agents_identities(self, agent_ids: Sequence[str]
                                ) -> dict[str, list[IdentityRecord]]:
        """Each of these agents' identities, oldest first (agents with none are left out)."""

        def txn(conn: Connection) -> dict[str, list[IdentityRecord]]:
            stmt = (select(ia.c.agent_id, ia.c.identity_id).join(i, i.c.id == ia.c.identity_id)
                    .where(ia.c.agent_id.in_(list(agent_ids)))
                    .order_by(i.c.created_at, i.c.id))
            links = conn.execute(stmt).all()
            loaded = _load_many(conn, list(dict.fromkeys(link.identity_id for link in links)))
            found: dict[str, list[IdentityRecord]] = {}
            for agent_id, identity_id in links:
                found.setdefault(agent_id, []).append(loaded[identity_id])
            return found

        return await self._runner.read(txn) if agent_ids else {}

    async def identified_ids(self, kind: str, *, identity_id: str | None = None,
                             identifier_keys: Sequence[str] | None = None) -> set[str]:
        """Ids of the agents (``kind="agent"``) or blocks (``"block"``) linked to this
        identity and/or to an identity with one of these keys (Letta's list filters)."""
        link, column = _links(kind)
        stmt = select(column).join(i, i.c.id == link.c.identity_id)
        if identity_id is not None:
            stmt = stmt.where(i.c.id == identity_id)
        if identifier_keys:
            stmt = stmt.where(i.c.identifier_key.in_(list(identifier_keys)))
        return await self._runner.read(lambda conn: set(conn.execute(stmt).scalars()))


# --- transaction helpers (functions of a sync Connection) ---

def _check(identity_type: str, properties: list[dict[str, Any]]) -> None:
    if identity_type not in IDENTITY_TYPES:
        raise ValueError(f"identity_type must be one of {', '.join(IDENTITY_TYPES)}, "
                         f"got {identity_type!r}")
    for prop in properties:
        if not isinstance(prop, dict) or set(prop) != {"key", "value", "type"}:
            raise ValueError(f"an identity property is {{'key', 'value', 'type'}}, got {prop!r}")
        if prop["type"] not in PROPERTY_TYPES:
            raise ValueError(f"property {prop['key']!r}: type must be one of "
                             f"{', '.join(PROPERTY_TYPES)}, got {prop['type']!r}")


def _values(identity: IdentityRecord) -> dict[str, Any]:
    return {"id": identity.id, "identifier_key": identity.identifier_key,
            "name": identity.name, "identity_type": identity.identity_type,
            "project_id": identity.project_id, "properties": list(identity.properties),
            "created_at": identity.created_at, "updated_at": identity.updated_at}


def _same_key(identifier_key: str, project_id: str | None) -> Any:
    project = i.c.project_id.is_(None) if project_id is None else i.c.project_id == project_id
    return (i.c.identifier_key == identifier_key) & project


def _ensure_key_free(conn: Connection, identifier_key: str, project_id: str | None) -> None:
    found = conn.execute(select(i.c.id).where(_same_key(identifier_key, project_id))).scalar()
    if found is not None:
        where = f" in project {project_id!r}" if project_id is not None else ""
        raise DuplicateError(f"an identity with identifier_key {identifier_key!r}{where} "
                             f"already exists (id {found})")


def _links(kind: str) -> tuple[Table, Any]:
    if kind == "agent":
        return ia, ia.c.agent_id
    if kind == "block":
        return ib, ib.c.block_id
    raise ValueError(f"kind must be 'agent' or 'block', got {kind!r}")


def _require(conn: Connection, table: Table, row_id: str, kind: str) -> None:
    """NotFoundError unless the row exists, in the acting project (agents, blocks and
    identities have one each)."""
    query = select(table.c.id).where(table.c.id == row_id)
    if (project := acting_project.get()) is not None:
        query = query.where(table.c.project == project)
    if conn.execute(query).first() is None:
        raise NotFoundError(f"no {kind} with id {row_id!r}")


def _link(conn: Connection, identity_id: str, kind: str, ids: Sequence[str], *,
          replace: bool) -> None:
    link, column = _links(kind)
    for row_id in ids:
        _require(conn, a if kind == "agent" else b, row_id, kind)
    if replace:
        conn.execute(delete(link).where(link.c.identity_id == identity_id))
    have = set(conn.execute(select(column).where(link.c.identity_id == identity_id)).scalars())
    new = [row_id for row_id in dict.fromkeys(ids) if row_id not in have]
    if new:
        conn.execute(insert(link), [{"identity_id": identity_id, column.name: row_id}
                                    for row_id in new])


def _relink(conn: Connection, identity_id: str, agent_id: str | None, block_id: str | None, *,
            attach: bool) -> None:
    _require(conn, i, identity_id, "identity")
    for kind, row_id in (("agent", agent_id), ("block", block_id)):
        if row_id is None:
            continue
        _require(conn, a if kind == "agent" else b, row_id, kind)
        link, column = _links(kind)
        conn.execute(delete(link).where(link.c.identity_id == identity_id)
                     .where(column == row_id))
        if attach:
            conn.execute(insert(link).values(identity_id=identity_id, **{column.name: row_id}))


def _load(conn: Connection, identity_id: str) -> IdentityRecord:
    found = _load_many(conn, [identity_id])
    if not found:
        raise NotFoundError(f"no identity with id {identity_id!r}")
    return found[identity_id]


def _load_many(conn: Connection, identity_ids: Sequence[str]) -> dict[str, IdentityRecord]:
    """These identities (those that exist), with their agents and blocks: three queries."""
    wanted = list(identity_ids)
    if not wanted:
        return {}
    agent_ids: dict[str, list[str]] = {}
    for identity_id, agent_id in conn.execute(
            select(ia.c.identity_id, ia.c.agent_id).join(a, a.c.id == ia.c.agent_id)
            .where(ia.c.identity_id.in_(wanted)).order_by(a.c.created_at, a.c.id)):
        agent_ids.setdefault(identity_id, []).append(agent_id)
    block_ids: dict[str, list[str]] = {}
    for identity_id, block_id in conn.execute(
            select(ib.c.identity_id, ib.c.block_id).join(b, b.c.id == ib.c.block_id)
            .where(ib.c.identity_id.in_(wanted)).order_by(b.c.created_at, b.c.id)):
        block_ids.setdefault(identity_id, []).append(block_id)
    return {row.id: IdentityRecord(
        identifier_key=row.identifier_key, name=row.name, identity_type=row.identity_type,
        id=row.id, project_id=row.project_id, properties=list(row.properties or []),
        agent_ids=agent_ids.get(row.id, []), block_ids=block_ids.get(row.id, []),
        created_at=row.created_at, updated_at=row.updated_at)
        for row in conn.execute(select(i).where(i.c.id.in_(wanted)))}

