"""Archival memory: passages stored by the store, searched by meaning in memory.

An agent's archival memory is the archives attached to it (shared ones included): its inserts
go to its default archive, its searches cover them all. One ``VectorIndex`` per archive,
loaded from the store on first search, appended to on insert, and caught up by ``seq`` with
rows other agents or processes added: no query reloads the archive. Rows deleted elsewhere
are dropped when a search meets them. On PostgreSQL with pgvector the store searches instead
(``nearest_passages``): no index in this process at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stateloop.errors import ConfigError
from stateloop.memory.embeddings import Embedder, OpenAIEmbedder
from stateloop.memory.vectors import VectorIndex
from stateloop.store import EmbeddingMismatchError, PassageRecord, Store
from stateloop.store.times import TimeLike, to_epoch
from stateloop.surrogates import check


@dataclass(slots=True)
class PassageHit:
    passage: PassageRecord
    score: float  # cosine similarity


class ArchivalMemory:
    """``insert`` and ``search`` over archives with one embedder."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._indexes: dict[str, VectorIndex] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def insert(self, agent_id: str, content: str | Sequence[str],
                     tags: Sequence[str] | None = None) -> list[PassageRecord]:
        """Embed and store text(s) in the agent's default archive (made on first use)."""
        archive_id = await self.store.default_archive(agent_id, self.embedding_config())
        return await self.insert_into(archive_id, content, tags)

    async def insert_into(self, archive_id: str, content: str | Sequence[str],
                          tags: Sequence[str] | None = None,
                          metadata: dict[str, Any] | None = None,
                          created_at: TimeLike | None = None) -> list[PassageRecord]:
        """Embed and store one text (or several) in an archive; the index grows in place."""
        texts = [content] if isinstance(content, str) else list(content)
        for number, text in enumerate(texts):
            check(text, "archival text" if len(texts) == 1 else f"archival text {number}")
        when = to_epoch(created_at)
        await self._check_model(archive_id)
        vectors = await self.embedder.embed(texts)
        passages = [PassageRecord(archive_id=archive_id, text=text, embedding=vector,
                                  embedding_model=self.embedder.model,
                                  embedding_dim=int(vectors.shape[1]), tags=list(tags or ()),
                                  metadata=dict(metadata or {}))
                    for text, vector in zip(texts, vectors, strict=True)]
        if when is not None:
            for passage in passages:
                passage.created_at = when
        stored = await self.store.insert_passages(archive_id, passages)
        index = self._indexes.get(archive_id)
        if index is not None and stored:
            index.add([p.id for p in stored], vectors, tags=[p.tags for p in stored],
                      created_at=[p.created_at for p in stored])
        return stored

    def embedding_config(self) -> dict[str, Any] | None:
        """Letta's EmbeddingConfig for this embedder, recorded on archives it makes (None
        while the dimension is unknown: an endpoint's reveals itself on the first call)."""
        try:
            dim = self.embedder.dim
        except ConfigError:
            return None
        remote = isinstance(self.embedder, OpenAIEmbedder)
        return {"embedding_endpoint_type": "openai" if remote else "hugging-face",
                "embedding_model": self.embedder.model, "embedding_dim": dim,
                "embedding_chunk_size": 300,
                "handle": f"{'openai' if remote else 'letta'}/{self.embedder.model}"}

    async def search(self, agent_id: str, query: str, *, tags: Sequence[str] | None = None,
                     tag_match_mode: str = "any", top_k: int = 10,
                     start_datetime: TimeLike | None = None,
                     end_datetime: TimeLike | None = None) -> list[PassageHit]:
        """The passages of the agent's archives closest in meaning to ``query``."""
        if self.store.searches_vectors:
            return await self._nearest(await self.store.passage_models(agent_id=agent_id),
                                       query, tags=tags, tag_match_mode=tag_match_mode,
                                       top_k=top_k, start_datetime=start_datetime,
                                       end_datetime=end_datetime)
        marks = await self.store.agent_archive_marks(agent_id)  # one read, as for one archive
        return await self._search(marks, query, tags=tags, tag_match_mode=tag_match_mode,
                                  top_k=top_k, start_datetime=start_datetime,
                                  end_datetime=end_datetime)

    async def search_archives(self, archive_ids: Sequence[str], query: str, *,
                              tags: Sequence[str] | None = None, tag_match_mode: str = "any",
                              top_k: int = 10, start_datetime: TimeLike | None = None,
                              end_datetime: TimeLike | None = None) -> list[PassageHit]:
        """The passages closest in meaning to ``query``, best first, after tag/date filters,
        across these archives."""
        if self.store.searches_vectors:
            return await self._nearest(await self.store.passage_models(archive_ids), query,
                                       tags=tags, tag_match_mode=tag_match_mode, top_k=top_k,
                                       start_datetime=start_datetime, end_datetime=end_datetime)
        return await self._search([(a, None) for a in archive_ids], query, tags=tags,
                                  tag_match_mode=tag_match_mode, top_k=top_k,
                                  start_datetime=start_datetime, end_datetime=end_datetime)

    async def _search(self, marks: Sequence[tuple[str, int | None]], query: str, *,
                      tags: Sequence[str] | None, tag_match_mode: str, top_k: int,
                      start_datetime: TimeLike | None,
                      end_datetime: TimeLike | None) -> list[PassageHit]:
        start, end = to_epoch(start_datetime), to_epoch(end_datetime, end_of_day=True)
        indexes = [index for index in [await self._index(a, mark) for a, mark in marks]
                   if index is not None]
        if not indexes:
            return []
        vector = (await self.embedder.embed([query]))[0]
        found: list[PassageHit] = []
        for index in indexes:
            found += await self._search_one(index, vector, top_k, tags, tag_match_mode,
                                            start, end)
        found.sort(key=lambda hit: -hit.score)
        return found[:top_k]

    async def _nearest(self, models: dict[str, tuple[str, int]], query: str, *,
                       tags: Sequence[str] | None, tag_match_mode: str, top_k: int,
                       start_datetime: TimeLike | None,
                       end_datetime: TimeLike | None) -> list[PassageHit]:
        """The store's own nearest-neighbour search over the archives holding embeddings."""
        for archive_id, (model, dim) in models.items():
            if model != self.embedder.model:
                raise self._wrong_model(archive_id, model, dim)
        if not models:
            return []
        vector = (await self.embedder.embed([query]))[0]
        found = await self.store.nearest_passages(
            list(models), vector, top_k=top_k, tags=tags, tag_match_mode=tag_match_mode,
            start=to_epoch(start_datetime), end=to_epoch(end_datetime, end_of_day=True))
        return [PassageHit(passage, score) for passage, score in found]

    async def _search_one(self, index: VectorIndex, vector: Any, top_k: int,
                          tags: Sequence[str] | None, tag_match_mode: str,
                          start: float | None, end: float | None) -> list[PassageHit]:
        for _ in range(2):
            hits = index.search(vector, top_k, tags=tags, tag_match_mode=tag_match_mode,
                                start=start, end=end)
            found = {p.id: p for p in await self.store.get_passages([h.id for h in hits])}
            gone = [h.id for h in hits if h.id not in found]
            if not gone:
                break
            index.remove(gone)  # deleted by another process; search once more without them
        return [PassageHit(found[h.id], h.score) for h in hits if h.id in found]

    async def delete(self, passage_ids: Sequence[str]) -> int:
        """Delete passages from the store and from every loaded index."""
        count = await self.store.delete_passages(passage_ids)
        for index in self._indexes.values():
            index.remove(passage_ids)
        return count

    async def _check_model(self, archive_id: str) -> None:
        stored = await self.store.archive_model(archive_id)
        if stored is not None and stored[0] != self.embedder.model:
            raise self._wrong_model(archive_id, *stored)

    async def _index(self, archive_id: str, newest: int | None = None) -> VectorIndex | None:
        """The archive's index, caught up to ``newest`` (its watermark, read if not given)."""
        async with self._locks.setdefault(archive_id, asyncio.Lock()):
            if newest is None:
                newest = await self.store.passage_watermark(archive_id)
            index = self._indexes.get(archive_id)
            if index is None or index.loaded_until < newest:
                index = await self._load(index, archive_id)
                if index is None:
                    return None
                index.loaded_until = newest
                self._indexes[archive_id] = index
            if index.model != self.embedder.model:
                raise self._wrong_model(archive_id, index.model, index.dim)
            return index

    def _wrong_model(self, archive_id: str, model: str | None, dim: int
                     ) -> EmbeddingMismatchError:
        return EmbeddingMismatchError(
            f"archive {archive_id!r} was embedded with {model!r} ({dim} dims); this embedder "
            f"is {self.embedder.model!r}. Use the same embedding model or re-embed the archive.")

    async def _load(self, index: VectorIndex | None, archive_id: str) -> VectorIndex | None:
        """Add the rows stored after ``index.loaded_until`` (all rows for a new index)."""
        import numpy as np

        batch = await self.store.load_vectors(
            archive_id, after_seq=index.loaded_until if index is not None else 0)
        if index is None:
            if not batch.ids:
                return None
            index = VectorIndex(batch.dim, batch.model, capacity=max(1024, len(batch.ids)))
        keep = [i for i, passage_id in enumerate(batch.ids) if passage_id not in index]
        if keep:
            matrix = np.frombuffer(batch.vectors, dtype="<f4").reshape(len(batch.ids), -1)
            index.add([batch.ids[i] for i in keep], matrix[keep],
                      tags=[batch.tags[i] for i in keep],
                      created_at=[batch.created_at[i] for i in keep])
        return index
