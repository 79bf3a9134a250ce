"""Everything that differs between SQL dialects: connection setup, transactions on the raw
connection, full-text search, vectors, and which claims were left by processes now gone.

SQLite: FTS5 recall indexed in batches, embeddings as float32 blobs. PostgreSQL: recall over
``to_tsvector('stateloop_recall', ...)`` expressions with GIN indexes (migration 0001), always
current, ranked with ts_rank_cd; embeddings as the same bytes in bytea.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ARRAY,
    ColumnClause,
    ColumnElement,
    Connection,
    Row,
    Select,
    String,
    Table,
    any_,
    bindparam,
    column,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    table,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite

from stateloop.store import schema

BUSY_TIMEOUT_MS = 5000


def configure_sqlite_connection(dbapi_conn: Any) -> None:
    """WAL, NORMAL sync, foreign keys; and let the 'begin' event own transactions."""
    # With isolation_level=None the driver never opens transactions behind our back, so
    # BEGIN IMMEDIATE (see begin_sqlite) is the only way a write transaction starts.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    try:
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    finally:
        cur.close()


def begin_sqlite(conn: Any) -> None:
    """Writers take the write lock up front: a deferred BEGIN that later upgrades can
    fail with SQLITE_BUSY at once instead of waiting on the busy timeout."""
    write = conn.get_execution_options().get("stateloop_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


class _SqliteTx:
    """Transactions on a sqlite3 connection in autocommit mode (see configure_sqlite_connection)."""

    @staticmethod
    def begin(dbapi: Any) -> None:
        dbapi.execute("BEGIN IMMEDIATE")

    @staticmethod
    def commit(dbapi: Any) -> None:
        dbapi.execute("COMMIT")

    @staticmethod
    def rollback(dbapi: Any) -> None:
        dbapi.execute("ROLLBACK")

    @staticmethod
    def in_transaction(dbapi: Any) -> bool:
        return bool(dbapi.in_transaction)


class _PostgresTx:
    """Transactions on a psycopg connection: it opens one at the first statement."""

    @staticmethod
    def begin(dbapi: Any) -> None:
        pass

    @staticmethod
    def commit(dbapi: Any) -> None:
        dbapi.commit()

    @staticmethod
    def rollback(dbapi: Any) -> None:
        dbapi.rollback()

    @staticmethod
    def in_transaction(dbapi: Any) -> bool:
        return int(dbapi.info.transaction_status) != 0  # psycopg's IDLE


SQLITE_TX, POSTGRES_TX = _SqliteTx(), _PostgresTx()


def upsert(conn: Connection, target: Table, values: dict[str, Any], key: str,
           keep: Sequence[str]) -> Row[Any]:
    """Insert ``values``, or update the row whose ``key`` they share, in one statement (two
    processes writing the same key at once both succeed); ``keep``'s columns stay as the
    row had them and are returned."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(target).values(values)
    changed = {name: stmt.excluded[name] for name in values if name != key and name not in keep}
    stmt = stmt.on_conflict_do_update(index_elements=[key], set_=changed)
    return conn.execute(stmt.returning(*(target.c[name] for name in keep))).one()


# --- full-text recall (SQLite FTS5; the table and triggers are made in migration 0001) ---

_fts = table("messages_fts", column("rowid"), column("text"))
RECALL_BATCH = 256  # index after this many new messages (and always before a search)
# Messages with text are indexed in batches; pure tool noise (tool calls and results with no
# text) only when a search first includes it (migration 0005 states the rule).
_BEHIND = ("SELECT coalesce(max(seq), 0) > (SELECT {mark} FROM recall_index WHERE id = 1) "
           "FROM messages")
_INDEX = ("INSERT INTO messages_fts(rowid, text, tool_text) SELECT seq, text, tool_text "
          "FROM messages WHERE seq > (SELECT {mark} FROM recall_index WHERE id = 1) "
          "AND text {test} ''")
_MARK = "UPDATE recall_index SET {mark} = (SELECT coalesce(max(seq), 0) FROM messages) WHERE id = 1"
_PASSES = {False: (("indexed_seq", "!="),),
           True: (("indexed_seq", "!="), ("tool_indexed_seq", "="))}


def catch_up_recall(conn: Connection, include_tool: bool = False) -> None:
    """Index what recall has not indexed yet (tool noise too with ``include_tool``); call
    inside a write transaction. It runs on the DBAPI connection, so the per-step write path
    can call it too."""
    if conn.dialect.name != "sqlite":
        return  # PostgreSQL's recall indexes are expressions over the rows: always current
    dbapi: Any = conn.connection.dbapi_connection
    for mark, test in _PASSES[include_tool]:
        if dbapi.execute(_BEHIND.format(mark=mark)).fetchone()[0]:
            dbapi.execute(_INDEX.format(mark=mark, test=test))
            dbapi.execute(_MARK.format(mark=mark))


_WORD = re.compile(r"\w+", re.UNICODE)


def fts_expression(query: str) -> str | None:
    """A safe FTS5 query: each word quoted, any word may match; bm25 ranks the rest."""
    words = _WORD.findall(query)
    if not words:
        return None
    return " OR ".join(f'"{w}"' for w in words)


def message_search(query: str, roles: Sequence[str], include_tool: bool, limit: int,
                   dialect: str = "sqlite") -> Select[Any] | None:
    """Ranked recall over every stored message (the caller narrows it to an agent, a thread,
    dates); None when the query has no words."""
    if dialect == "postgresql":
        return _pg_message_search(query, roles, include_tool, limit)
    expr = fts_expression(query)
    if expr is None:
        return None
    if not include_tool:
        expr = f"text : ({expr})"  # FTS5 column filter: leave tool calls and results out
    m = schema.messages
    # bm25() is lower-is-better; negate it so callers get higher-is-better scores.
    score: ColumnElement[Any] = (-literal_column("bm25(messages_fts)")).label("score")
    stmt = (select(*schema.MESSAGE_READ, m.c.agent_id, m.c.run_id, score)
            .select_from(_fts.join(m, m.c.seq == _fts.c.rowid))
            .where(literal_column("messages_fts").op("MATCH")(expr))
            .where(m.c.role.in_(list(roles)))
            .order_by(literal_column("bm25(messages_fts)"))
            .limit(limit))
    return stmt


# The expressions migration 0001 indexes (GIN) on PostgreSQL; queries must spell them the same.
PG_TEXT_VECTOR = "to_tsvector('stateloop_recall', messages.text)"
PG_TOOL_VECTOR = "to_tsvector('stateloop_recall', coalesce(messages.tool_text, ''))"


def tsquery_expression(query: str) -> str | None:
    """The PostgreSQL twin of ``fts_expression``: any word may match (the ``stateloop_recall``
    configuration stems English words as FTS5's porter tokenizer does)."""
    words = _WORD.findall(query)
    return " | ".join(words) if words else None


def _pg_message_search(query: str, roles: Sequence[str], include_tool: bool,
                       limit: int) -> Select[Any] | None:
    expr = tsquery_expression(query)
    if expr is None:
        return None
    m = schema.messages
    tsq = func.to_tsquery(literal_column("'stateloop_recall'"), bindparam("tsq", expr))
    text_vec: ColumnElement[Any] = literal_column(PG_TEXT_VECTOR)
    found: ColumnElement[Any] = text_vec.op("@@")(tsq)
    vector: ColumnElement[Any] = text_vec
    if include_tool:
        tool_vec: ColumnElement[Any] = literal_column(PG_TOOL_VECTOR)
        found = or_(found, tool_vec.op("@@")(tsq))  # each side uses its own index
        vector = text_vec.op("||")(tool_vec)
    score = func.ts_rank_cd(vector, tsq)
    stmt = (select(*schema.MESSAGE_READ, m.c.agent_id, m.c.run_id, score.label("score"))
            .where(found).where(m.c.role.in_(list(roles)))
            .order_by(score.desc(), m.c.seq.desc()).limit(limit))
    return stmt


# --- orders ---

def equals_kept_in_order(column: Any, value: str, dialect: str) -> ColumnElement[bool]:
    """``column = value``, spelled so that an ORDER BY that leads with ``column`` keeps it.
    PostgreSQL drops a column fixed by ``=`` from the order; a page of one agent's messages
    by seq may then walk the whole table's seq backward, filtering, when the agent's
    messages are old (its statistics suppose them spread evenly). As ``= ANY(ARRAY[...])``
    the order stays (agent_id, seq), which only that index gives."""
    if dialect == "sqlite":
        return column == value
    return column == any_(literal([value], ARRAY(String)))


# --- JSON documents ---

def json_array_has_any(document: Any, path: tuple[int | str, ...], values: Sequence[str],
                       dialect: str) -> ColumnElement[bool]:
    """Whether the JSON array at ``path`` in ``document`` (a JSON column) holds one of
    ``values``; a missing array holds none."""
    if dialect == "sqlite":
        spelled = "$" + "".join(f"[{p}]" if isinstance(p, int) else f'."{p}"' for p in path)
        items = func.json_each(document, spelled).table_valued("value")
    else:
        items = func.json_array_elements_text(document[path]).table_valued("value")
    return exists(select(literal_column("1")).select_from(items)
                  .where(items.c.value.in_(list(values))))


# --- vectors: float32 little-endian blobs ---

def encode_vector(vector: Any) -> bytes:
    """One embedding as stored: float32 little-endian bytes."""
    import numpy as np  # lazy: numpy, for vectors only

    arr = np.asarray(vector, dtype="<f4")
    if arr.ndim != 1:
        raise ValueError(f"an embedding must be one vector, got shape {arr.shape}")
    return arr.tobytes()


def decode_vector(blob: bytes) -> list[float]:
    """The stored bytes back as a list of floats."""
    import numpy as np  # lazy: numpy, for vectors only

    return np.frombuffer(blob, dtype="<f4").astype(float).tolist()


def claimed_by_gone(claimed_by: ColumnElement[Any], owner: str,
                    dialect: str) -> ColumnElement[bool]:
    """Rows claimed by a process other than ``owner`` that is gone: on PostgreSQL, one with
    no connection left (its ``application_name`` is the claimant's name); on SQLite, any
    other, as one process holds the file."""
    gone = claimed_by.is_not(None) & (claimed_by != owner)
    if dialect == "postgresql":
        name: ColumnClause[Any] = literal_column("application_name")
        gone &= claimed_by.not_in(select(name).select_from(text("pg_stat_activity"))
                                  .where(name.is_not(None)))
    return gone
