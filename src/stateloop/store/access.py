"""Credentials, the audit log and usage in the ``api_keys``, ``access_tokens``, ``audit_log``
and ``project_usage`` tables of ``SqlStore``: API keys and client-side access tokens kept by
the digest of their secret, looked up by id on every request that presents one (the store is
the truth, so a revocation holds at once on every process), one audit row per write
request, and each project's model tokens a day."""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import ColumnElement, Connection, delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from stateloop.store import schema
from stateloop.store.paging import keyset
from stateloop.store.projects import acting_project
from stateloop.store.records import Page
from stateloop.store.runner import Runner


def in_acting_project(agent_id: ColumnElement[Any]) -> ColumnElement[bool] | None:
    """A condition keeping the rows whose agent (the column ``agent_id``) is of the acting
    project; None when the request acts in every project."""
    project = acting_project.get()
    if project is None:
        return None
    return agent_id.in_(select(schema.agents.c.id).where(schema.agents.c.project == project))


# What a path parameter names, in a table whose agent_id says whose it is.
_OWNED = {"run_id": schema.runs, "step_id": schema.steps,
          "conversation_id": schema.conversations, "message_id": schema.messages}
# ... or in a table with a project of its own.
_PROJECTED = {"block_id": schema.blocks, "archive_id": schema.archives,
              "folder_id": schema.folders, "source_id": schema.folders,
              "identity_id": schema.identities, "group_id": schema.groups,
              "batch_id": schema.message_batches, "job_id": schema.message_batches}
OWNED_PARAMETERS = frozenset(_OWNED) | frozenset(_PROJECTED)



k, tk, log, use = (schema.api_keys, schema.access_tokens, schema.audit_log,
                  schema.project_usage)


@dataclasses.dataclass(frozen=True)
class KeyRecord:
    id: str
    name: str
    project: str
    role: str
    digest: str
    created_by: str
    created_at: float
    expires_at: float | None = None
    revoked_at: float | None = None


@dataclasses.dataclass(frozen=True)
class TokenRecord:
    id: str
    digest: str
    hostname: str
    policy: list[dict[str, Any]]
    project: str
    created_by: str
    created_at: float
    expires_at: float


@dataclasses.dataclass(frozen=True)
class AuditRecord:
    seq: int
    at: float
    credential: str
    project: str | None
    method: str
    route: str
    path: str
    status: int


def _key(row: Any) -> KeyRecord:
    return KeyRecord(**{field.name: getattr(row, field.name)
                        for field in dataclasses.fields(KeyRecord)})


def _token(row: Any) -> TokenRecord:
    return TokenRecord(**{field.name: getattr(row, field.name)
                          for field in dataclasses.fields(TokenRecord)})


class AccessMixin:
    """The ``api_keys``, ``access_tokens`` and ``audit_log`` tables of ``SqlStore``."""

    _runner: Runner

    async def add_api_key(self, record: KeyRecord) -> None:
        await self._runner.write(lambda conn: conn.execute(
            insert(k), [dataclasses.asdict(record)]))

    async def get_api_key(self, key_id: str) -> KeyRecord | None:
        def txn(conn: Connection) -> KeyRecord | None:
            row = conn.execute(select(k).where(k.c.id == key_id)).first()
            return None if row is None else _key(row)

        return await self._runner.read(txn)

    async def list_api_keys(self, page: Page, *, project: str | None = None,
                            ) -> list[KeyRecord]:
        def txn(conn: Connection) -> list[KeyRecord]:
            scope = [] if project is None else [k.c.project == project]
            query = keyset(conn, select(k).where(*scope), k, page, scope=scope)
            return [_key(row) for row in conn.execute(query)]

        return await self._runner.read(txn)

    async def update_api_key(self, key_id: str, **changes: Any) -> KeyRecord | None:
        """Change ``name``, ``expires_at`` or ``revoked_at``; None when no key has the id."""

        def txn(conn: Connection) -> KeyRecord | None:
            if changes:
                conn.execute(update(k).where(k.c.id == key_id).values(**changes))
            row = conn.execute(select(k).where(k.c.id == key_id)).first()
            return None if row is None else _key(row)

        return await self._runner.write(txn)

    async def add_access_token(self, record: TokenRecord) -> None:
        row = dataclasses.asdict(record)
        row["agent_ids"] = sorted({entry["id"] for entry in record.policy})
        await self._runner.write(lambda conn: conn.execute(insert(tk), [row]))

    async def get_access_token(self, token_id: str) -> TokenRecord | None:
        def txn(conn: Connection) -> TokenRecord | None:
            row = conn.execute(select(tk).where(tk.c.id == token_id)).first()
            return None if row is None else _token(row)

        return await self._runner.read(txn)

    async def list_access_tokens(self, *, now: float, offset: int, limit: int,
                                 agent_id: str | None = None, project: str | None = None,
                                 ) -> tuple[list[TokenRecord], bool]:
        """Unexpired tokens newest first, from ``offset``; and whether more follow. With
        ``agent_id``, those whose policy names that agent (checked here, in Python, on the
        page's rows: JSON containment differs between the dialects)."""

        def txn(conn: Connection) -> tuple[list[TokenRecord], bool]:
            query = select(tk).where(tk.c.expires_at > now)
            if project is not None:
                query = query.where(tk.c.project == project)
            query = query.order_by(tk.c.created_at.desc(), tk.c.id.desc())
            if agent_id is None:
                rows = conn.execute(query.offset(offset).limit(limit + 1)).all()
                return [_token(row) for row in rows[:limit]], len(rows) > limit
            found = [_token(row) for row in conn.execute(query)
                     if agent_id in row.agent_ids]
            return found[offset:offset + limit], len(found) > offset + limit

        return await self._runner.read(txn)

    async def delete_access_token(self, token_id: str, *, project: str | None = None) -> bool:
        def txn(conn: Connection) -> bool:
            scope = [] if project is None else [tk.c.project == project]
            return bool(conn.execute(delete(tk).where(tk.c.id == token_id, *scope)).rowcount)

        return await self._runner.write(txn)

    async def origin_has_token(self, hostname: str, now: float) -> bool:
        """Whether any unexpired token is for this origin (a CORS preflight carries none)."""
        return await self._runner.read(lambda conn: conn.execute(
            select(tk.c.id).where(tk.c.hostname == hostname, tk.c.expires_at > now).limit(1)
        ).first() is not None)

    async def record_audit(self, entries: list[dict[str, Any]]) -> None:
        if entries:
            await self._runner.write(lambda conn: conn.execute(insert(log), entries))

    async def list_audit(self, *, before: int | None = None, limit: int = 50,
                         credential: str | None = None, project: str | None = None,
                         ) -> list[AuditRecord]:
        """Audit rows newest first, older than the row ``before`` (a seq)."""

        def txn(conn: Connection) -> list[AuditRecord]:
            query = select(log)
            if before is not None:
                query = query.where(log.c.seq < before)
            if credential is not None:
                query = query.where(log.c.credential == credential)
            if project is not None:
                query = query.where(log.c.project == project)
            rows = conn.execute(query.order_by(log.c.seq.desc()).limit(limit)).all()
            return [AuditRecord(**{field.name: getattr(row, field.name)
                                   for field in dataclasses.fields(AuditRecord)})
                    for row in rows]

        return await self._runner.read(txn)

    async def add_usage(self, project: str, day: str, tokens: int) -> None:
        """Add a run's tokens to its project's day (one statement: processes add at once)."""

        def txn(conn: Connection) -> None:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            stmt = dialect.insert(use).values(project=project, day=day, tokens=tokens, runs=1)
            conn.execute(stmt.on_conflict_do_update(
                index_elements=["project", "day"],
                set_={"tokens": use.c.tokens + stmt.excluded.tokens, "runs": use.c.runs + 1}))

        await self._runner.write(txn)

    async def usage_on(self, project: str, day: str) -> int:
        return await self._runner.read(lambda conn: conn.execute(
            select(use.c.tokens).where(use.c.project == project, use.c.day == day)
        ).scalar() or 0)

    async def list_usage(self, *, since: str, project: str | None = None,
                         ) -> list[dict[str, Any]]:
        """Each project's days from ``since`` on, newest first."""

        def txn(conn: Connection) -> list[dict[str, Any]]:
            query = select(use).where(use.c.day >= since)
            if project is not None:
                query = query.where(use.c.project == project)
            rows = conn.execute(query.order_by(use.c.day.desc(), use.c.project)).all()
            return [dict(row._mapping) for row in rows]

        return await self._runner.read(txn)

    async def agent_project(self, id_or_name: str, *, by_name: bool = True) -> str | None:
        """The project of the agent with this id (else, ``by_name``, the newest of this
        name), None when there is none."""
        a = schema.agents

        def txn(conn: Connection) -> str | None:
            found = conn.execute(select(a.c.project).where(a.c.id == id_or_name)).scalar()
            return found if found is not None or not by_name else conn.execute(
                select(a.c.project).where(a.c.name == id_or_name)
                .order_by(a.c.created_at.desc(), a.c.id.desc()).limit(1)).scalar()

        return await self._runner.read(txn)

    async def owner_project(self, parameter: str, value: str) -> str | None:
        """The project of the block, archive, folder, identity, group or message batch (a
        ``batch_id``, or a ``job_id``: a batch is Letta's job), or of the agent
        whose run, step, conversation or message, the path parameter ``parameter`` names by
        the id ``value``; None when there is none."""
        if parameter in _PROJECTED:
            table = _PROJECTED[parameter]
            return await self._runner.read(lambda conn: conn.execute(
                select(table.c.project).where(table.c.id == value)).scalar())
        owned, a = _OWNED[parameter], schema.agents
        return await self._runner.read(lambda conn: conn.execute(
            select(a.c.project).join(owned, owned.c.agent_id == a.c.id)
            .where(owned.c.id == value).limit(1)).scalar())
