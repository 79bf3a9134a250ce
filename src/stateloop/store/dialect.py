"""Everything that differs between SQL dialects: connection setup, full-text search, vectors.

Only SQLite is implemented. PostgreSQL lands here (tsvector + GIN for recall, pgvector or
bytea for embeddings) without touching sql.py's callers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    column,
    literal_column,
    select,
    table,
)

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


def message_search(agent_id: str | None, query: str, roles: Sequence[str], include_tool: bool,
                   start: float | None, end: float | None, limit: int) -> Select[Any] | None:
    """Ranked recall over every stored message of one agent (of all agents: ``None``); None
    when the query has no words."""
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
    if agent_id is not None:
        stmt = stmt.where(m.c.agent_id == agent_id)
    if start is not None:
        stmt = stmt.where(m.c.created_at >= start)
    if end is not None:
        stmt = stmt.where(m.c.created_at <= end)
    return stmt


# --- vectors: float32 little-endian blobs ---

def encode_vector(vector: Any) -> bytes:
    """One embedding as stored: float32 little-endian bytes."""
    import numpy as np

    arr = np.asarray(vector, dtype="<f4")
    if arr.ndim != 1:
        raise ValueError(f"an embedding must be one vector, got shape {arr.shape}")
    return arr.tobytes()


def decode_vector(blob: bytes) -> list[float]:
    """The stored bytes back as a list of floats."""
    import numpy as np

    return np.frombuffer(blob, dtype="<f4").astype(float).tolist()

