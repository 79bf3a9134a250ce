"""What SQL a store's writer connection runs, for tests that count statements."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from stateloop.store.sql import SqlStore


@contextmanager
def traced(store: SqlStore) -> Iterator[list[str]]:
    """The statements the store's writer runs inside the block, in order."""
    statements: list[str] = []
    writer = store._runner._writer_conn().connection.dbapi_connection  # type: ignore[attr-defined]
    writer.set_trace_callback(statements.append)
    try:
        yield statements
    finally:
        writer.set_trace_callback(None)
