"""Archives in the store: named archival stores and which agents reach them.

An agent's archival memory is the archives attached to it; the one it owns (its default,
made on first use as in Letta) takes its inserts. Deleting an agent removes its attachments
only: archives and their passages stay, as in Letta, and go with ``delete_archive``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from stateloop.store import schema
from stateloop.store.errors import NotFoundError
from stateloop.store.paging import keyset
from stateloop.store.projects import acting_project
from stateloop.store.records import EVERYTHING, ArchiveRecord, Page
from stateloop.store.runner import Runner

ar = schema.archives
aa = schema.archives_agents
_FIELDS = [f.name for f in dataclasses.fields(ArchiveRecord)]


class ArchivesMixin:
    """Archive operations of ``SqlStore``."""

    _runner: Runner

    async def create_archive(self, archive: ArchiveRecord, *, owner: str | None = None,
                             ) -> ArchiveRecord:
        """Store a new archive; ``owner`` (an agent id) gets it attached as its default."""

        def txn(conn: Connection) -> ArchiveRecord:
            if owner is not None:
                _check_agent(conn, owner)
            conn.execute(insert(ar).values(_values(archive)))
            if owner is not None:
                _attach(conn, owner, archive.id, is_owner=True)
            return archive

        return await self._runner.write(txn)

    async def get_archive(self, archive_id: str) -> ArchiveRecord:
        """The archive with this id (NotFoundError if none)."""
        return await self._runner.read(lambda conn: _load(conn, archive_id))

    async def list_archives(self, *, name: str | None = None, agent_id: str | None = None,
                            page: Page = EVERYTHING) -> list[ArchiveRecord]:
        """Archives on ``page`` (default: all, oldest first), by exact ``name`` and those
        attached to ``agent_id``, read in SQL."""
        stmt = select(ar)
        if (project := acting_project.get()) is not None:
            stmt = stmt.where(ar.c.project == project)
        if name is not None:
            stmt = stmt.where(ar.c.name == name)
        if agent_id is not None:
            stmt = stmt.where(ar.c.id.in_(select(aa.c.archive_id)
                                          .where(aa.c.agent_id == agent_id)))
        return await self._runner.read(
            lambda conn: [_record(row) for row in conn.execute(keyset(conn, stmt, ar, page))])

    async def update_archive(self, archive_id: str, **changes: Any) -> ArchiveRecord:
        """Change ``name``, ``description`` or ``metadata``; returns the archive as stored."""
        unknown = set(changes) - {"name", "description", "metadata", "embedding_config"}
        if unknown:
            raise ValueError(f"archives have no field(s) {sorted(unknown)}")

        def txn(conn: Connection) -> ArchiveRecord:
            _load(conn, archive_id)
            if changes:
                conn.execute(update(ar).where(ar.c.id == archive_id)
                             .values(**changes, updated_at=time.time()))
            return _load(conn, archive_id)

        return await self._runner.write(txn)

    async def delete_archive(self, archive_id: str) -> None:
        """Delete an archive, its passages and its attachments."""

        def txn(conn: Connection) -> None:
            _load(conn, archive_id)
            conn.execute(delete(ar).where(ar.c.id == archive_id))  # cascades

        await self._runner.write(txn)

    async def attach_archive(self, agent_id: str, archive_id: str) -> None:
        """Give the agent access to the archive (a no-op if it has it)."""

        def txn(conn: Connection) -> None:
            _check_agent(conn, agent_id)
            _load(conn, archive_id)
            _attach(conn, agent_id, archive_id, is_owner=False)

        await self._runner.write(txn)

    async def detach_archive(self, agent_id: str, archive_id: str) -> None:
        """Take the agent's access away; the archive and its passages stay."""

        def txn(conn: Connection) -> None:
            _check_agent(conn, agent_id)
            _load(conn, archive_id)
            conn.execute(delete(aa).where(aa.c.agent_id == agent_id)
                         .where(aa.c.archive_id == archive_id))

        await self._runner.write(txn)

    async def agent_archive_ids(self, agent_id: str) -> list[str]:
        """The archives the agent reaches: the one it owns first, then in attachment order."""
        stmt = (select(aa.c.archive_id).where(aa.c.agent_id == agent_id)
                .order_by(aa.c.is_owner.desc(), aa.c.created_at, aa.c.archive_id))
        return await self._runner.read(lambda conn: list(conn.execute(stmt).scalars()))

    async def archive_agent_ids(self, archive_id: str, page: Page = EVERYTHING) -> list[str]:
        """The agents on ``page`` (default: all) of those attached to the archive, in
        attachment order, read in SQL."""
        mine = (aa.c.archive_id == archive_id,)

        def txn(conn: Connection) -> list[str]:
            _load(conn, archive_id)
            stmt = keyset(conn, select(aa.c.agent_id).where(*mine), aa, page,
                          key=(aa.c.created_at, aa.c.agent_id), ident=aa.c.agent_id, scope=mine)
            return list(conn.execute(stmt).scalars())

        return await self._runner.read(txn)

    async def default_archive(self, agent_id: str,
                              embedding_config: dict[str, Any] | None = None) -> str:
        """The archive the agent's inserts go to: the first it reaches, else a new one it
        owns, named "NAME's Archive" as in Letta."""

        def txn(conn: Connection) -> str:
            name = _check_agent(conn, agent_id)
            found = conn.execute(select(aa.c.archive_id).where(aa.c.agent_id == agent_id)
                                 .order_by(aa.c.is_owner.desc(), aa.c.created_at,
                                           aa.c.archive_id).limit(1)).scalar()
            if found is not None:
                return str(found)
            archive = ArchiveRecord(name=f"{name}'s Archive", embedding_config=embedding_config)
            conn.execute(insert(ar).values(_values(archive)))
            _attach(conn, agent_id, archive.id, is_owner=True)
            return archive.id

        return await self._runner.write(txn)


def _check_agent(conn: Connection, agent_id: str) -> str:
    name = conn.execute(select(schema.agents.c.name)
                        .where(schema.agents.c.id == agent_id)).scalar()
    if name is None:
        raise NotFoundError(f"agent with id {agent_id!r} not found")
    return str(name)


def _attach(conn: Connection, agent_id: str, archive_id: str, *, is_owner: bool) -> None:
    exists = conn.execute(select(aa.c.agent_id).where(aa.c.agent_id == agent_id)
                          .where(aa.c.archive_id == archive_id)).first()
    if exists is None:
        conn.execute(insert(aa).values(agent_id=agent_id, archive_id=archive_id,
                                       is_owner=is_owner, created_at=time.time()))


def _load(conn: Connection, archive_id: str) -> ArchiveRecord:
    row = conn.execute(select(ar).where(ar.c.id == archive_id)).first()
    if row is None:
        raise NotFoundError(f"no archive {archive_id!r}")
    return _record(row)


def _record(row: Any) -> ArchiveRecord:
    return ArchiveRecord(**{name: getattr(row, name) for name in _FIELDS})


def _values(archive: ArchiveRecord) -> dict[str, Any]:
    return {name: getattr(archive, name) for name in _FIELDS}
