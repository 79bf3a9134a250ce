"""Keyset pages in SQL: the rows between two cursor ids on a stable, indexed order.

As in Letta, ``after`` and ``before`` are ids of rows, relative to the requested order: a
client that passes the last id it saw as ``after`` walks the whole list, newest first or
oldest first. A page reads only its own rows, however large the table.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Connection, Select, Table, select, tuple_

from stateloop.store.records import Page


def keyset(conn: Connection, stmt: Select[Any], table: Table, page: Page,
           key: tuple[Column[Any], ...] | None = None) -> Select[Any]:
    """``stmt`` (a select over ``table``) limited to ``page``, on the order of ``key``
    (default ``(created_at, id)``; its last column must be the id). A cursor naming no row
    is ignored, as if it were not given."""
    columns = key if key is not None else (table.c.created_at, table.c.id)
    descending = page.order == "desc"
    for cursor, later in ((page.after, True), (page.before, False)):
        if cursor is None:
            continue
        mark = conn.execute(select(*columns).where(table.c.id == cursor)).first()
        if mark is None:
            continue
        position, bound = tuple_(*columns), tuple_(*mark)
        stmt = stmt.where(position > bound if later != descending else position < bound)
    stmt = stmt.order_by(*(c.desc() if descending else c.asc() for c in columns))
    return stmt.limit(page.limit) if page.limit is not None else stmt
