"""Archival embeddings in pgvector on PostgreSQL: the column, its index, nearest-neighbour SQL.

With the ``vector`` extension, every passage's embedding is also kept in
``passages.embedding_vector``, a ``vector`` column without a fixed dimension, so an archive
embedded by any model fits. The HNSW index (cosine) is a partial expression index over
``embedding_vector::vector(384)`` for the rows of 384 dimensions (MiniLM, the default
embedder): an HNSW index needs one dimension. Passages of any other size (an OpenAI embedder's
1536) are searched exactly, in SQL, with the same query and ranking; no second index per size.

The float32 blob stays the passage's embedding as stored on both dialects (``get_passages``,
exports, a database later opened without pgvector); the column is derived from it here.

Without the extension (Debian's PostgreSQL; or no right to create it) the column does not
exist and archival search stays in memory, exactly as on SQLite.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Float,
    MetaData,
    Select,
    String,
    bindparam,
    cast,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.exc import DBAPIError
from sqlalchemy.types import UserDefinedType

from stateloop.store import schema

COLUMN = "embedding_vector"
INDEXED_DIM = 384  # the default embedder's (MiniLM); other sizes are searched exactly
INDEX = "ix_passages_embedding_hnsw"
UNFILLED = "ix_passages_embedding_unfilled"
_LOCK = "SELECT pg_advisory_xact_lock(7305218801)"  # the migrations' lock (migrate.py)
_BACKFILL_ROWS = 1000


class Vector(UserDefinedType[Any]):
    """pgvector's ``vector`` type, bound from a float sequence in pgvector's binary form."""

    cache_ok = True
    render_bind_cast = True  # %s::vector: a binary parameter must say its type everywhere

    def __init__(self, dim: int | None = None) -> None:
        self.dim = dim

    def get_col_spec(self, **kw: Any) -> str:
        return "vector" if self.dim is None else f"vector({self.dim})"

    def bind_processor(self, dialect: Any) -> Any:
        return lambda value: None if value is None else BinaryVector.of(value)


class BinaryVector:
    """A vector as pgvector receives it in binary: dimension, a spare 16 bits, float32 values,
    all big-endian. Its text form (``[x, y, ...]``) costs ~1 ms a row to print at 384
    dimensions; this costs a few microseconds."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    @classmethod
    def of(cls, vector: Any) -> BinaryVector:
        import numpy as np  # lazy: numpy, for vectors only

        values = np.asarray(vector, dtype=">f4").reshape(-1)
        return cls(struct.pack(">HH", values.shape[0], 0) + values.tobytes())


def adapt(conn: Connection) -> None:
    """Let this connection send ``BinaryVector`` parameters (call in each transaction that
    binds vectors: the connection may be one the store did not open, as in a migration)."""
    adapt_psycopg(conn.connection.dbapi_connection)


def adapt_psycopg(dbapi_conn: Any) -> None:
    """``adapt`` for a psycopg connection."""
    dbapi_conn.adapters.register_dumper(BinaryVector, _dumper())


@functools.cache
def _dumper() -> type:
    from psycopg.adapt import Dumper  # lazy: optional: the PostgreSQL driver
    from psycopg.pq import Format  # lazy: optional: the PostgreSQL driver

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = 0  # unknown: the server takes the type from the statement (a vector column/cast)

        def dump(self, obj: Any) -> bytes:
            return bytes(obj.data)

    return VectorDumper


# The passages table as this module sees it: the shared columns plus the vector. It lives in
# its own MetaData so the schema (and SQLite) never learns of a column only some databases have.
passages = schema.passages.to_metadata(MetaData())
passages.append_column(Column(COLUMN, Vector()))


def present(conn: Connection) -> bool:
    """Whether this database keeps embeddings in pgvector (``enable`` has run)."""
    if conn.dialect.name != "postgresql":
        return False
    return bool(conn.execute(text(
        "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('passages') "
        "AND attname = :column AND NOT attisdropped)"), {"column": COLUMN}).scalar())


def enable(conn: Connection) -> str | None:
    """Create the extension (if allowed), the column (filled from the stored blobs) and the
    index, or fill the rows that lack a vector; None when done, else why pgvector cannot be
    used here."""
    if conn.dialect.name != "postgresql":
        return "not PostgreSQL"
    conn.execute(text(_LOCK))  # processes opening one database together do this once
    if present(conn):
        _backfill(conn)  # rows written meanwhile by a process from before revision 0016
        return None
    if not conn.execute(text("SELECT EXISTS (SELECT 1 FROM pg_available_extensions "
                             "WHERE name = 'vector')")).scalar():
        return "the vector extension is not installed on this server"
    try:
        with conn.begin_nested():  # a refusal must not abort the caller's transaction
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    except DBAPIError as exc:
        return f"CREATE EXTENSION vector failed: {str(exc.orig).strip()}"
    conn.execute(text(f"ALTER TABLE passages ADD COLUMN {COLUMN} vector"))
    # Keep the vector in the row and let the blob go out of line instead: an exact scan then
    # reads no TOAST (7x faster at 384 dims); vectors too big for a page still move out.
    conn.execute(text(f"ALTER TABLE passages ALTER COLUMN {COLUMN} SET STORAGE MAIN"))
    _backfill(conn)
    # Built after the backfill: one bulk build is far cheaper than as many inserts.
    conn.execute(text(
        f"CREATE INDEX {INDEX} ON passages USING hnsw (({COLUMN}::vector({INDEXED_DIM})) "
        f"vector_cosine_ops) WHERE embedding_dim = {INDEXED_DIM}"))
    # Finds the rows a process from before revision 0016 adds during a rolling upgrade;
    # empty otherwise, so the check at every open costs nothing.
    conn.execute(text(f"CREATE INDEX {UNFILLED} ON passages (seq) WHERE {COLUMN} IS NULL "
                      "AND embedding IS NOT NULL"))
    # Fresh statistics, or the planner may think a big archive is tiny and scan it exactly.
    conn.execute(text("ANALYZE passages"))
    return None


def disable(conn: Connection) -> None:
    """Drop the index and the column (the blobs still hold every embedding); the extension
    stays, as other databases' users may rely on it."""
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"DROP INDEX IF EXISTS {INDEX}"))
        conn.execute(text(f"DROP INDEX IF EXISTS {UNFILLED}"))
        conn.execute(text(f"ALTER TABLE passages DROP COLUMN IF EXISTS {COLUMN}"))


def _backfill(conn: Connection) -> None:
    import numpy as np  # lazy: numpy, for vectors only

    adapt(conn)
    p = passages
    after = 0
    while True:
        found = conn.execute(select(p.c.seq, p.c.embedding).where(p.c.seq > after)
                             .where(p.c[COLUMN].is_(None)).where(p.c.embedding.is_not(None))
                             .order_by(p.c.seq).limit(_BACKFILL_ROWS)).all()
        if not found:
            return
        conn.execute(p.update().where(p.c.seq == bindparam("at"))
                     .values({COLUMN: bindparam("vec", type_=Vector())}),
                     [{"at": row.seq, "vec": np.frombuffer(row.embedding, dtype="<f4")}
                      for row in found])
        after = found[-1].seq


def nearest(archive_ids: Sequence[str], vector: Any, dim: int, top_k: int, *,
            tags: Sequence[str] | None, tag_match_mode: str, start: float | None,
            end: float | None, exact: bool) -> Select[Any]:
    """The ``top_k`` passages of these archives closest to ``vector`` (cosine), best first,
    with their similarity as ``score``. At 384 dimensions, unless ``exact``, the expression
    is the HNSW index's, so the planner may walk the index instead of scanning the rows."""
    v = passages.c[COLUMN]
    query = bindparam("query", vector, type_=Vector())
    if dim == INDEXED_DIM and not exact:
        distance = cast(v, Vector(dim)).op("<=>", return_type=Float)(cast(query, Vector(dim)))
    else:
        distance = v.op("<=>", return_type=Float)(query)
    stmt = (select(*(passages.c[c.name] for c in schema.passages.c),
                   (1 - distance).label("score"))
            .where(passages.c.archive_id.in_(list(archive_ids)))
            # A literal, not a parameter: a prepared statement's generic plan could not
            # prove the partial index's predicate and would never use the index.
            .where(passages.c.embedding_dim == literal_column(str(int(dim))))
            .where(v.is_not(None)))
    if tags:
        wanted = bindparam("tags", list(dict.fromkeys(tags)), type_=ARRAY(String))
        json_tags = cast(passages.c.tags, JSONB)
        stmt = stmt.where(json_tags.has_any(wanted) if tag_match_mode == "any"
                          else json_tags.has_all(wanted))
    if start is not None:
        stmt = stmt.where(passages.c.created_at >= start)
    if end is not None:
        stmt = stmt.where(passages.c.created_at <= end)
    return stmt.order_by(distance).limit(top_k)


def search_settings(conn: Connection, top_k: int) -> None:
    """For this transaction: look at no fewer candidates than asked for, and keep walking the
    graph (in exact distance order) while filters reject what it finds. ``hnsw.ef_search`` is
    otherwise the server's (pgvector's 40, or what ``ALTER DATABASE ... SET`` says): the
    speed/recall trade is the operator's (bench/pgvector_search.py measures both)."""
    # The vector literal loads pgvector into this session while the statement is planned, so
    # its settings exist when it runs; iterative scans (pgvector 0.8) are asked for only where
    # the installed version has them: on older ones the exact pass behind a short answer
    # (nearest_passages) finds what the walk missed.
    conn.execute(text(
        "SELECT set_config('hnsw.ef_search', greatest(current_setting('hnsw.ef_search')::int,"
        " :k)::text, true), (SELECT set_config(name, 'strict_order', true) FROM pg_settings "
        "WHERE name = 'hnsw.iterative_scan') FROM (SELECT '[0]'::vector) AS loaded"),
        {"k": min(1000, top_k)})
