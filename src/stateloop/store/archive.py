"""Archival memory in the store: passages with their embeddings, one model per archive.

On PostgreSQL with pgvector the store also searches them (``nearest_passages``, SQL in
pgvector.py); elsewhere memory/archival.py searches an index it loads with ``load_vectors``.
Archives themselves (names, which agents reach them) are in archives.py."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from stateloop.store import dialect, pgvector, rows, schema
from stateloop.store.errors import EmbeddingMismatchError, NotFoundError, StoreError
from stateloop.store.records import PassageRecord, VectorBatch
from stateloop.store.runner import Runner
from stateloop.store.url import hide_password

logger = logging.getLogger("stateloop.store")

p = schema.passages
ar = schema.archives
aa = schema.archives_agents


class ArchiveMixin:
    """Passage operations of ``SqlStore``."""

    _runner: Runner
    url: str
    dialect: str
    searches_vectors = False  # True on PostgreSQL with pgvector (see open_vectors)

    async def open_vectors(self, *, create: bool = True) -> None:
        """At open: on PostgreSQL, set up pgvector if this database lacks it (``create``) and
        decide where archival search runs; one log line when it cannot be pgvector."""
        if self.dialect != "postgresql":
            return
        why = await (self._runner.write(pgvector.enable) if create else
                     self._runner.read(lambda conn: None if pgvector.present(conn)
                                       else "this database was not migrated for it"))
        self.searches_vectors = why is None
        if why is not None:
            logger.warning("archival search on %s is exact, in memory (as on SQLite), not "
                           "pgvector: %s", hide_password(self.url), why)

    async def insert_passages(self, archive_id: str, passages: Sequence[PassageRecord],
                              ) -> list[PassageRecord]:
        """Store passages; every embedding in an archive must come from one model and size."""
        batch = list(passages)
        model_dim = _batch_model(archive_id, batch)

        def txn(conn: Connection) -> list[PassageRecord]:
            if conn.execute(select(ar.c.id).where(ar.c.id == archive_id)).first() is None:
                raise NotFoundError(f"no archive {archive_id!r}")
            if model_dim is not None:
                stored = _archive_model(conn, archive_id)
                if stored is not None and stored != model_dim:
                    raise _mismatch(archive_id, stored, model_dim)
            if not batch:
                return batch
            values = [_passage_values(archive_id, passage) for passage in batch]
            table = p
            if self.searches_vectors:
                pgvector.adapt(conn)
                table = pgvector.passages
                for value, passage in zip(values, batch, strict=True):
                    value[pgvector.COLUMN] = passage.embedding
            seqs = conn.execute(insert(table).returning(table.c.seq,
                                                        sort_by_parameter_order=True),
                                values).scalars().all()
            for passage, seq in zip(batch, seqs, strict=True):
                passage.seq = seq
                passage.archive_id = archive_id
            return batch

        try:
            return await self._runner.write(txn, offload=len(batch) > 256)
        except IntegrityError as exc:
            raise StoreError(f"insert_passages into archive {archive_id!r} refused: "
                             f"{exc.orig}") from exc

    async def archive_model(self, archive_id: str) -> tuple[str, int] | None:
        """(embedding model, dimension) of the archive, or None while it has none."""
        return await self._runner.read(lambda conn: _archive_model(conn, archive_id))

    async def get_passages(self, ids: Sequence[str]) -> list[PassageRecord]:
        """Passages with these ids, in the order given (unknown ids are skipped)."""
        wanted = list(ids)
        stmt = select(p).where(p.c.id.in_(wanted))

        def txn(conn: Connection) -> list[PassageRecord]:
            found = {row.id: rows.passage_from_row(row, dialect.decode_vector)
                     for row in conn.execute(stmt)}
            return [found[i] for i in wanted if i in found]

        return await self._runner.read(txn)

    async def list_passages(self, archive_ids: Sequence[str], *, limit: int = 100,
                            after_seq: int | None = None, before_seq: int | None = None,
                            order: str = "asc", search: str | None = None,
                            ) -> list[PassageRecord]:
        """A page of these archives' passages in insertion order or its reverse, between two
        cursors (``seq``, relative to ``order``, as in Letta), containing ``search`` (any
        case) if given; read in SQL."""
        stmt = select(p).where(p.c.archive_id.in_(list(archive_ids)))
        later, earlier = (after_seq, before_seq) if order == "asc" else (before_seq, after_seq)
        if later is not None:
            stmt = stmt.where(p.c.seq > later)
        if earlier is not None:
            stmt = stmt.where(p.c.seq < earlier)
        if search is not None:
            stmt = stmt.where(p.c.text.icontains(search, autoescape=True))
        stmt = stmt.order_by(p.c.seq if order == "asc" else p.c.seq.desc()).limit(limit)
        return await self._runner.read(
            lambda conn: [rows.passage_from_row(row, dialect.decode_vector)
                          for row in conn.execute(stmt)])

    async def delete_passages(self, ids: Sequence[str]) -> int:
        """Delete passages by id; how many were deleted."""
        stmt = delete(p).where(p.c.id.in_(list(ids)))
        return await self._runner.write(lambda conn: conn.execute(stmt).rowcount)

    async def count_passages(self, agent_id: str) -> int:
        """How many passages the archives attached to the agent hold."""
        attached = select(aa.c.archive_id).where(aa.c.agent_id == agent_id)
        stmt = select(func.count()).select_from(p).where(p.c.archive_id.in_(attached))
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))

    async def embedding_bytes(self) -> int:
        """Bytes of every archival passage's embedding as stored (float32)."""
        stmt = select(func.coalesce(func.sum(func.length(p.c.embedding)), 0))
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))

    async def passage_watermark(self, archive_id: str) -> int:
        """The highest passage seq of the archive (0 if empty): a cheap "anything new?"."""
        stmt = select(func.coalesce(func.max(p.c.seq), 0)).where(p.c.archive_id == archive_id)
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))

    async def agent_archive_marks(self, agent_id: str) -> list[tuple[str, int]]:
        """The archives the agent reaches (its own first) with each one's ``passage_watermark``:
        what a search needs to know, in one read."""
        mark = (select(func.coalesce(func.max(p.c.seq), 0)).where(p.c.archive_id == aa.c.archive_id)
                .scalar_subquery())
        stmt = (select(aa.c.archive_id, mark).where(aa.c.agent_id == agent_id)
                .order_by(aa.c.is_owner.desc(), aa.c.created_at, aa.c.archive_id))
        return await self._runner.read(
            lambda conn: [(row[0], int(row[1])) for row in conn.execute(stmt)])

    async def passage_models(self, archive_ids: Sequence[str] | None = None, *,
                             agent_id: str | None = None) -> dict[str, tuple[str, int]]:
        """(embedding model, dimension) of each of these archives (or the agent's) that holds
        embeddings, in one read."""

        def txn(conn: Connection) -> dict[str, tuple[str, int]]:
            ids = archive_ids or ()
            if agent_id is not None:
                ids = conn.execute(select(aa.c.archive_id)
                                   .where(aa.c.agent_id == agent_id)).scalars().all()
            # One statement per archive, not one correlated query: with the archive id known,
            # the planner goes straight to a small archive's rows through its index.
            found = {archive_id: _archive_model(conn, archive_id) for archive_id in ids}
            return {archive_id: model for archive_id, model in found.items() if model}

        return await self._runner.read(txn)

    async def nearest_passages(self, archive_ids: Sequence[str], vector: Any, *,
                               top_k: int = 10, tags: Sequence[str] | None = None,
                               tag_match_mode: str = "any", start: float | None = None,
                               end: float | None = None) -> list[tuple[PassageRecord, float]]:
        """The ``top_k`` passages of these archives closest to ``vector`` (cosine similarity,
        best first) after the tag and date filters; needs ``searches_vectors``."""
        if tag_match_mode not in ("any", "all"):
            raise ValueError(f"tag_match_mode must be 'any' or 'all', not {tag_match_mode!r}")
        if not self.searches_vectors:
            raise StoreError("nearest_passages needs PostgreSQL with pgvector")
        query = [float(x) for x in vector]
        if top_k <= 0 or not archive_ids:
            return []

        def search(conn: Connection, exact: bool) -> Sequence[Any]:
            return conn.execute(pgvector.nearest(
                archive_ids, query, len(query), top_k, tags=tags, tag_match_mode=tag_match_mode,
                start=start, end=end, exact=exact)).all()

        def txn(conn: Connection) -> list[tuple[PassageRecord, float]]:
            pgvector.adapt(conn)
            pgvector.search_settings(conn, top_k)
            found = search(conn, exact=False)
            if len(found) < top_k and len(query) == pgvector.INDEXED_DIM:
                # Fewer than asked: the graph walk may have given up on rows the filters
                # refuse (hnsw.max_scan_tuples); an exact pass makes sure none is missed.
                found = search(conn, exact=True)
            return [(rows.passage_from_row(row, dialect.decode_vector), _similarity(row.score))
                    for row in found]

        return await self._runner.read(txn)

    async def load_vectors(self, archive_id: str, *, after_seq: int = 0) -> VectorBatch:
        """Embeddings (as one buffer) with ids, tags and times, for building a search index."""
        stmt = (select(p.c.seq, p.c.id, p.c.embedding, p.c.embedding_model, p.c.embedding_dim,
                       p.c.tags, p.c.created_at)
                .where(p.c.archive_id == archive_id).where(p.c.seq > after_seq)
                .where(p.c.embedding.is_not(None)).order_by(p.c.seq))

        def txn(conn: Connection) -> VectorBatch:
            found = conn.execute(stmt).all()
            model = found[0].embedding_model if found else None
            dim = found[0].embedding_dim if found else 0
            return VectorBatch(seqs=[row.seq for row in found], ids=[row.id for row in found],
                               vectors=b"".join(row.embedding for row in found), dim=dim,
                               model=model, tags=[list(row.tags) for row in found],
                               created_at=[row.created_at for row in found])

        return await self._runner.read(txn)


def _batch_model(archive_id: str, batch: list[PassageRecord]) -> tuple[str, int] | None:
    """The one (model, dim) of a batch's embeddings; a mixed batch is an error."""
    found: tuple[str, int] | None = None
    for passage in batch:
        if passage.embedding is None:
            continue
        if passage.embedding_model is None:
            raise EmbeddingMismatchError(
                f"passage {passage.id!r}: an embedding needs its embedding_model")
        dim = len(passage.embedding)
        if passage.embedding_dim is not None and passage.embedding_dim != dim:
            raise EmbeddingMismatchError(
                f"passage {passage.id!r}: embedding_dim says {passage.embedding_dim} but the "
                f"vector has {dim} values")
        passage.embedding_dim = dim
        this = (passage.embedding_model, dim)
        if found is not None and this != found:
            raise _mismatch(archive_id, found, this)
        found = this
    return found


def _archive_model(conn: Connection, archive_id: str) -> tuple[str, int] | None:
    row = conn.execute(select(p.c.embedding_model, p.c.embedding_dim)
                       .where(p.c.archive_id == archive_id).where(p.c.embedding.is_not(None))
                       .limit(1)).first()
    return None if row is None else (row.embedding_model, row.embedding_dim)


def _mismatch(archive_id: str, stored: tuple[str, int], new: tuple[str, int]
              ) -> EmbeddingMismatchError:
    return EmbeddingMismatchError(
        f"archive {archive_id!r} holds embeddings from {stored[0]!r} ({stored[1]} "
        f"dims); cannot add ones from {new[0]!r} ({new[1]} dims). Re-embed the archive or "
        "use the same embedding model.")


def _passage_values(archive_id: str, passage: PassageRecord) -> dict[str, Any]:
    blob = None if passage.embedding is None else dialect.encode_vector(passage.embedding)
    return {"id": passage.id, "archive_id": archive_id, "text": passage.text, "embedding": blob,
            "embedding_model": passage.embedding_model, "embedding_dim": passage.embedding_dim,
            "tags": list(passage.tags), "metadata": passage.metadata,
            "created_at": passage.created_at}


def _similarity(score: float) -> float:
    # A zero vector has no direction: pgvector says NaN where the in-memory search says 0.
    return 0.0 if score != score else float(score)

