"""Credentials and the audit log in the ``api_keys``, ``access_tokens`` and ``audit_log``
tables of ``SqlStore``: API keys and client-side access tokens kept by the digest of their
secret, looked up by id on every request that presents one (the store is the truth, so a
revocation holds at once on every process), and one audit row per write request."""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from stateloop.store import schema
from stateloop.store.paging import keyset
from stateloop.store.records import Page
from stateloop.store.runner import Runner

k, tk, log = schema.api_keys, schema.access_tokens, schema.audit_log


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
