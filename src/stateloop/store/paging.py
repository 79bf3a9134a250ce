"""Keyset pages in SQL: the rows between two cursor ids on a stable, indexed order.

As in Letta, ``after`` and ``before`` are ids of rows, relative to the requested order: a
client that passes the last id it saw as ``after`` walks the whole list, newest first or
oldest first. A page reads only its own rows, however large the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, ColumnElement, Connection, Select, Table, select, tuple_

from stateloop.store.records import Page


def keyset(conn: Connection, stmt: Select[Any], table: Table, page: Page,
           key: tuple[Column[Any], ...] | None = None, *, ident: Column[Any] | None = None,
           scope: Sequence[ColumnElement[bool]] = ()) -> Select[Any]:
    """``stmt`` (a select over ``table``) limited to ``page``, on the order of ``key``
    (default ``(created_at, id)``; its last column must be unique in the list: the id, or a
    seq). A cursor is the value of ``ident`` (default: the id) of a row of ``table`` within
    ``scope`` (the list's own conditions); one naming no such row is ignored, as if it were
    not given."""
    columns = key if key is not None else (table.c.created_at, table.c.id)
    named = ident if ident is not None else table.c.id
    after, before = (None if cursor is None else
                     conn.execute(select(*columns).where(named == cursor, *scope)).first()
                     for cursor in (page.after, page.before))
    return between(stmt, columns, page, after, before)


def between(stmt: Select[Any], columns: Sequence[ColumnElement[Any]], page: Page,
            after: Sequence[Any] | None, before: Sequence[Any] | None) -> Select[Any]:
    """``stmt`` limited to ``page`` on the order of ``columns``, given where its cursors
    stand: their rows' values of ``columns`` (None: no such cursor, or none that names a
    row)."""
    descending = page.order == "desc"
    position = tuple_(*columns)
    for mark, later in ((after, True), (before, False)):
        if mark is not None:
            bound = tuple_(*mark)
            stmt = stmt.where(position > bound if later != descending else position < bound)
    stmt = stmt.order_by(*(c.desc() if descending else c.asc() for c in columns))
    return stmt.limit(page.limit) if page.limit is not None else stmt
