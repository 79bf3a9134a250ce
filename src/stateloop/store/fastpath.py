"""The per-step write path: Core statements compiled once, run on the DBAPI cursor.

SQLAlchemy's per-execute bookkeeping (~70 us a statement here) is most of a step's cost;
the SQL text still comes from Core, compiled once per dialect, so it stays portable.

On PostgreSQL the step path runs in a psycopg pipeline (batching.py): statements go out
without waiting for their replies, so a row count or a RETURNING value is known only once
something waits for it. ``FastStatement.require`` and ``InsertRows.execute(keys=False)`` let
the step path avoid waiting: the whole group then takes one round trip.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import Any

from sqlalchemy import JSON, Connection, Insert, Table, bindparam, insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement

from stateloop.store.errors import NotFoundError
from stateloop.store.rows import to_json


def insert_all(table: Table) -> Insert:
    """INSERT of every column except an autoincrement integer key, one bind per column."""
    return insert(table).values({
        col.name: bindparam(col.name) for col in table.columns
        if not (col.primary_key and col.autoincrement is True)})


class FastStatement:
    """A Core statement compiled once per dialect and executed on the raw cursor."""

    def __init__(self, stmt: ClauseElement, json_params: Iterable[str] = ()) -> None:
        self._stmt = stmt
        self._json = frozenset(json_params)
        self._compiled: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._required: str | None = None  # the pipelined form of ``require`` (PostgreSQL)
        self._defaults: dict[str, Any] = {}  # literal binds Core made, such as the 1 in x + 1

    @classmethod
    def for_insert(cls, table: Table) -> FastStatement:
        """An insert of a whole row; JSON columns are serialised here."""
        json_cols = [col.name for col in table.columns if isinstance(col.type, JSON)]
        return cls(insert_all(table), json_cols)

    def _sql(self, conn: Connection) -> tuple[str, tuple[str, ...]]:
        name = conn.dialect.name
        found = self._compiled.get(name)
        if found is None:
            compiled = self._stmt.compile(dialect=conn.dialect)
            order = tuple(getattr(compiled, "positiontup", None) or ())
            self._defaults = {k: v for k, v in compiled.params.items() if v is not None}
            found = self._compiled[name] = (str(compiled), order)
        return found

    def _row(self, order: tuple[str, ...], params: Mapping[str, Any]) -> tuple[Any, ...]:
        defaults = self._defaults
        values = [params[k] if k in params else defaults[k] for k in order]
        if self._json:
            values = [to_json(v) if k in self._json and v is not None else v
                      for k, v in zip(order, values, strict=True)]
        return tuple(values)

    def execute(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Run once; the number of rows it changed."""
        sql, order = self._sql(conn)
        cursor = _run(conn, sql, self._row(order, params))
        try:
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def require(self, conn: Connection, params: Mapping[str, Any], missing: str) -> None:
        """Run once; raise ``NotFoundError(missing)`` if it changed no row. In a PostgreSQL
        pipeline, where the count would come back too late to decide on the commit, the
        statement fails on the server instead (``stateloop_require``, migration 0017): the
        group is then written again outside the pipeline, where this raises."""
        if not pipelined(conn):
            if not self.execute(conn, params):
                raise NotFoundError(missing)
            return
        sql, order = self._sql(conn)
        if self._required is None:
            self._required = (f"WITH changed AS ({sql} RETURNING 1) "
                              "SELECT stateloop_require(count(*)) FROM changed")
        _run(conn, self._required, self._row(order, params)).close()

    def execute_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run once per row, in one call."""
        sql, order = self._sql(conn)
        _run(conn, sql, [self._row(order, row) for row in rows], many=True).close()

    def fetch(self, conn: Connection, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run a query once; its rows as plain tuples (JSON columns undecoded)."""
        sql, order = self._sql(conn)
        cursor = _run(conn, sql, self._row(order, params))
        try:
            return cursor.fetchall()
        finally:
            cursor.close()


def pipelined(conn: Connection) -> bool:
    """Whether ``conn`` is in a psycopg pipeline, where results come back later."""
    pgconn = getattr(conn.connection.dbapi_connection, "pgconn", None)
    return pgconn is not None and bool(pgconn.pipeline_status)


def _run(conn: Connection, sql: str, params: Any, *, many: bool = False) -> Any:
    """Execute on a new DBAPI cursor, which the caller closes."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        if many:
            cursor.executemany(sql, params)
        else:
            cursor.execute(sql, params)
    except conn.dialect.loaded_dbapi.Error as exc:
        cursor.close()
        # Raise what SQLAlchemy would (IntegrityError, OperationalError, ...).
        raise DBAPIError.instance(sql, params, exc, conn.dialect.loaded_dbapi.Error) from exc
    return cursor


class InsertRows:
    """A multi-row INSERT: one statement per ``CHUNK`` rows, so the database does a batch's
    work in one call (each statement costs more than its rows' share of the work). Rows are
    tuples in ``columns`` order with JSON already encoded. There is a statement per batch
    size up to ``CHUNK``; the driver's statement cache keeps the ones in use prepared.
    ``key`` names the autoincrement column whose values ``execute`` reports."""

    CHUNK = 64

    def __init__(self, table: Table, columns: Sequence[str], key: str | None = None) -> None:
        self._table = table
        self.columns = tuple(columns)
        self._key = key
        self._compiled: dict[tuple[str, int, bool], str] = {}
        self._one: dict[str, tuple[str, str]] = {}

    def _sql(self, conn: Connection, count: int, keys: bool) -> str:
        key = (conn.dialect.name, count, keys)
        found = self._compiled.get(key)
        if found is None:
            head, group = self._one_row(conn)
            found = f"{head} VALUES {', '.join([group] * count)}"
            if keys and conn.dialect.name != "sqlite":
                found += f" RETURNING {self._key}"  # a sequence's values need not be consecutive
            self._compiled[key] = found
        return found

    def _one_row(self, conn: Connection) -> tuple[str, str]:
        """The one-row INSERT from Core, split before its VALUES group: repeating the group
        is instant, where compiling 64 rows of binds through Core takes tens of ms."""
        found = self._one.get(conn.dialect.name)
        if found is None:
            stmt = insert(self._table).values({name: bindparam(name) for name in self.columns})
            compiled = stmt.compile(dialect=conn.dialect)
            # PostgreSQL's compiler adds RETURNING for the key; execute adds its own
            head, _, group = str(compiled).partition(" RETURNING ")[0].rpartition(" VALUES ")
            order = tuple(getattr(compiled, "positiontup", None) or ())
            positional = conn.dialect.paramstyle in ("qmark", "format")
            if not positional or order != self.columns or not head:
                raise NotImplementedError(
                    f"multi-row insert needs positional binds in column order; {conn.dialect.name} "
                    "compiles them otherwise")
            found = self._one[conn.dialect.name] = (head, group)
        return found

    def execute(self, conn: Connection, rows: Sequence[tuple[Any, ...]], *,
                keys: bool = True) -> list[int]:
        """Insert ``rows`` (at least one); each row's ``key``, in order (SQLite: rowids, each
        one past the table's highest; PostgreSQL: the values RETURNING gives). With ``keys``
        false none are asked for (nor waited for, in a pipeline) and none are returned."""
        start = 0
        found: list[int] = []
        sqlite = conn.dialect.name == "sqlite"
        keys = keys and self._key is not None
        while start < len(rows):
            size = min(self.CHUNK, len(rows) - start)
            params = tuple(chain.from_iterable(rows[start:start + size]))
            cursor = _run(conn, self._sql(conn, size, keys), params)
            try:
                if not keys:
                    pass
                elif sqlite:
                    last = int(cursor.lastrowid)
                    found.extend(range(last - size + 1, last + 1))
                else:
                    found.extend(row[0] for row in cursor.fetchall())
            finally:
                cursor.close()
            start += size
        return found
