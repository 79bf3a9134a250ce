"""Provider records in the SQL store: the providers added over REST, unique by name, their
keys held sealed (the store never sees a key in clear)."""

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

p = schema.providers


@dataclass(slots=True)
class ProviderRecord:
    """A provider added over REST. ``api_key_sealed``/``access_key_sealed``: the keys as
    the operator's encryption key sealed them (None: no key)."""

    name: str
    provider_type: str
    base_url: str | None = None
    region: str | None = None
    api_version: str | None = None
    api_key_sealed: str | None = None
    access_key_sealed: str | None = None
    id: str = field(default_factory=lambda: new_record_id("provider"))
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


class ProvidersMixin:
    """Provider operations of ``SqlStore``."""

    _runner: Runner

    async def create_provider(self, provider: ProviderRecord) -> ProviderRecord:
        """Store a new provider; a taken name is a ``DuplicateError``."""

        def txn(conn: Connection) -> ProviderRecord:
            _ensure_name_free(conn, provider.name, None)
            conn.execute(insert(p), _values(provider))
            return provider

        return await self._write_provider(txn)

    async def get_provider(self, provider_id: str) -> ProviderRecord:
        """The provider with this id."""
        return await self._runner.read(lambda conn: _load(conn, p.c.id, provider_id))

    async def find_provider(self, name: str) -> ProviderRecord | None:
        """The provider named ``name``, or None."""

        def read(conn: Connection) -> ProviderRecord | None:
            row = conn.execute(select(p).where(p.c.name == name)).first()
            return None if row is None else _record(row)

        return await self._runner.read(read)

    async def list_providers(self) -> list[ProviderRecord]:
        """Every provider, oldest first."""
        stmt = select(p).order_by(p.c.created_at, p.c.id)
        return await self._runner.read(
            lambda conn: [_record(row) for row in conn.execute(stmt)])

    async def update_provider(self, provider: ProviderRecord) -> ProviderRecord:
        """Replace the stored provider with the same id (its name stays)."""

        def txn(conn: Connection) -> ProviderRecord:
            _load(conn, p.c.id, provider.id)
            provider.updated_at = time.time()
            values = _values(provider)
            del values["id"], values["created_at"], values["name"]
            conn.execute(update(p).where(p.c.id == provider.id).values(**values))
            return provider

        return await self._write_provider(txn)

    async def delete_provider(self, provider_id: str) -> ProviderRecord:
        """Remove the provider; returns what was stored."""

        def txn(conn: Connection) -> ProviderRecord:
            found = _load(conn, p.c.id, provider_id)
            conn.execute(delete(p).where(p.c.id == found.id))
            return found

        return await self._runner.write(txn)

    async def _write_provider(self, txn: Any) -> ProviderRecord:
        try:
            result: ProviderRecord = await self._runner.write(txn)
        except IntegrityError as exc:  # a name taken by a concurrent writer
            raise DuplicateError("a provider with this name already exists") from exc
        return result


def _ensure_name_free(conn: Connection, name: str, own_id: str | None) -> None:
    found = conn.execute(select(p.c.id).where(p.c.name == name)).scalar()
    if found is not None and found != own_id:
        raise DuplicateError(f"a provider named {name!r} already exists")


def _load(conn: Connection, column: Any, value: str) -> ProviderRecord:
    row = conn.execute(select(p).where(column == value)).first()
    if row is None:
        raise NotFoundError(f"no provider {value!r}")
    return _record(row)


def _record(row: Any) -> ProviderRecord:
    return ProviderRecord(name=row.name, provider_type=row.provider_type, base_url=row.base_url,
                          region=row.region, api_version=row.api_version,
                          api_key_sealed=row.api_key_sealed,
                          access_key_sealed=row.access_key_sealed, id=row.id,
                          created_at=row.created_at, updated_at=row.updated_at)


def _values(provider: ProviderRecord) -> dict[str, Any]:
    return {"id": provider.id, "name": provider.name, "provider_type": provider.provider_type,
            "base_url": provider.base_url, "region": provider.region,
            "api_version": provider.api_version, "api_key_sealed": provider.api_key_sealed,
            "access_key_sealed": provider.access_key_sealed,
            "created_at": provider.created_at, "updated_at": provider.updated_at}
