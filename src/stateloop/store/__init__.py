"""Persistence: the ``Store`` protocol, its records, and ``open_store`` for the SQL store.

Importing this package is cheap; SQLAlchemy loads when a store is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stateloop.store.base import Store
from stateloop.store.errors import (
    BlockLimitError,
    DatabaseOpenError,
    DuplicateError,
    EmbeddingMismatchError,
    NotFoundError,
    SchemaTooNewError,
    StoreError,
)
from stateloop.store.presence import serving as announced
from stateloop.store.records import (
    DEFAULT_BLOCK_LIMIT,
    AgentRecord,
    ArchiveRecord,
    BlockRecord,
    IdentityRecord,
    MessageHit,
    Page,
    PassageRecord,
    RunRecord,
    StepRecord,
    ToolRecord,
    VectorBatch,
)
from stateloop.store.url import resolve_url

if TYPE_CHECKING:
    from stateloop.store.sql import SqlStore

__all__ = [
    "DEFAULT_BLOCK_LIMIT", "AgentRecord", "ArchiveRecord", "BlockLimitError", "BlockRecord",
    "DatabaseOpenError", "DuplicateError", "EmbeddingMismatchError", "IdentityRecord",
    "MessageHit", "NotFoundError", "Page", "PassageRecord", "RunRecord", "SchemaTooNewError",
    "StepRecord", "Store", "StoreError", "ToolRecord", "VectorBatch", "open_store",
    "serving",
]


def serving(url: str | None = None) -> str | None:
    """The address of the stateloop server that holds the SQLite database at ``url`` (default
    as ``open_store``'s), else None: a second process must not keep its own copy of an agent
    the server runs. Always None on PostgreSQL, where servers share agents."""
    path = resolve_url(url).path
    return None if path is None else announced(path)


async def open_store(url: str | None = None, *, migrate: bool = True) -> SqlStore:
    """Open the database at ``url`` (default: ``STATELOOP_DATABASE_URL`` or
    ``~/.stateloop/stateloop.db``), upgrading its schema; see ``stateloop.store.sql``."""
    from stateloop.store.sql import open_store as _open  # lazy: SQLAlchemy loads when a store opens

    return await _open(url, migrate=migrate)
