"""Archival memory: passages stored by the store, searched by meaning in memory.

An agent's archival memory is the archives attached to it (shared ones included): its inserts
go to its default archive, its searches cover them all. Each archive has one embedding model,
as in Letta: its ``embedding_config`` (else the model its passages were stored with, else the
agent's). Its passages and the queries searching it are embedded with that model, so vectors
of different models never meet. One ``VectorIndex`` per archive, loaded from the store on
first search, appended to on insert, and caught up by ``seq`` with rows other agents or
processes added: no query reloads the archive. Rows deleted elsewhere are dropped when a
search meets them. On PostgreSQL with pgvector the store searches instead
(``nearest_passages``): no index in this process at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stateloop.memory.embedding_models import Embedders, describe, serves
from stateloop.memory.embeddings import Embedder
from stateloop.memory.vectors import VectorIndex
from stateloop.store import EmbeddingMismatchError, PassageRecord, Store
from stateloop.store.times import TimeLike, to_epoch
from stateloop.surrogates import check


@dataclass(slots=True)
class PassageHit:
    passage: PassageRecord
    score: float  # cosine similarity


class ArchivalMemory:
    """``insert`` and ``search`` over archives. ``embedder`` embeds for the archives made here
    (an agent's default one) and those that name its model; ``embedders`` makes the others'."""

    def __init__(self, store: Store, embedder: Embedder,
                 embedders: Embedders | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.embedders = embedders or Embedders.from_environment()
        self._indexes: dict[str, VectorIndex] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._models: dict[str, Embedder] = {}  # archive id -> the embedder of its model

    async def insert(self, agent_id: str, content: str | Sequence[str],
                     tags: Sequence[str] | None = None) -> list[PassageRecord]:
        """Embed and store text(s) in the agent's default archive (made on first use)."""
        archive_id = await self.store.default_archive(agent_id, self.embedding_config())
        return await self.insert_into(archive_id, content, tags)

    async def insert_into(self, archive_id: str, content: str | Sequence[str],
                          tags: Sequence[str] | None = None,
                          metadata: dict[str, Any] | None = None,
                          created_at: TimeLike | None = None) -> list[PassageRecord]:
        """Embed and store one text (or several) in an archive with the archive's model; the
        index grows in place."""
        texts = [content] if isinstance(content, str) else list(content)
        for number, text in enumerate(texts):
            check(text, "archival text" if len(texts) == 1 else f"archival text {number}")
        when = to_epoch(created_at)
        embedder = await self.embedder_of(archive_id)
        stored_model = await self.store.archive_model(archive_id)
        if stored_model is not None and stored_model[0] != embedder.model:
            raise self._wrong_model(archive_id, *stored_model, embedder)
        vectors = await embedder.embed(texts)
        passages = [PassageRecord(archive_id=archive_id, text=text, embedding=vector,
                                  embedding_model=embedder.model,
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
        """Letta's EmbeddingConfig of ``embedder``, recorded on the archives made here (None
        while its size is unknown: an endpoint's shows on the first call)."""
        return describe(self.embedder)

    async def archive_config(self, archive_id: str) -> dict[str, Any] | None:
        """The archive's EmbeddingConfig: as recorded, else that of the model its passages
        were stored with (None for an empty archive that records none)."""
        archive = await self.store.get_archive(archive_id)
        if archive.embedding_config:
            return archive.embedding_config
        stored = await self.store.archive_model(archive_id)
        if stored is None:
            return None
        found = describe(self.embedders.for_model(stored[0])) or {}
        return {**found, "embedding_model": stored[0], "embedding_dim": stored[1]}

    async def embedder_of(self, archive_id: str) -> Embedder:
        """The embedder of the archive's model: its recorded config, else its passages'
        model, else ``embedder``."""
        found = self._models.get(archive_id)
        if found is not None:
            return found
        config = (await self.store.get_archive(archive_id)).embedding_config
        if config and config.get("embedding_model"):
            found = (self.embedder if serves(self.embedder, config["embedding_model"],
                                              config.get("embedding_dim"))
                     else self.embedders.get(config))
        else:
            stored = await self.store.archive_model(archive_id)
            if stored is None:
                return self.embedder  # nothing decides yet: not remembered
            found = (self.embedder if serves(self.embedder, *stored)
                     else self.embedders.for_model(stored[0]))
        self._models[archive_id] = found
        return found

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
        queries = _Queries(query)
        found: list[PassageHit] = []
        for archive_id, mark in marks:
            index = await self._index(archive_id, mark)
            if index is None:
                continue
            embedder = await self.embedder_of(archive_id)
            if index.model != embedder.model:
                raise self._wrong_model(archive_id, index.model, index.dim, embedder)
            vector = await queries.vector(embedder)
            found += await self._search_one(index, vector, top_k, tags, tag_match_mode,
                                            start, end)
        found.sort(key=lambda hit: -hit.score)
        return found[:top_k]

    async def _nearest(self, models: dict[str, tuple[str, int]], query: str, *,
                       tags: Sequence[str] | None, tag_match_mode: str, top_k: int,
                       start_datetime: TimeLike | None,
                       end_datetime: TimeLike | None) -> list[PassageHit]:
        """The store's own nearest-neighbour search over the archives holding embeddings: one
        query per model, each over the archives of that model."""
        groups: dict[tuple[str, int], list[str]] = {}
        for archive_id, (model, dim) in models.items():
            embedder = await self.embedder_of(archive_id)
            if model != embedder.model:
                raise self._wrong_model(archive_id, model, dim, embedder)
            groups.setdefault((model, dim), []).append(archive_id)
        queries = _Queries(query)
        hits: list[PassageHit] = []
        for archive_ids in groups.values():
            vector = await queries.vector(await self.embedder_of(archive_ids[0]))
            found = await self.store.nearest_passages(
                archive_ids, vector, top_k=top_k, tags=tags, tag_match_mode=tag_match_mode,
                start=to_epoch(start_datetime), end=to_epoch(end_datetime, end_of_day=True))
            hits += [PassageHit(passage, score) for passage, score in found]
        hits.sort(key=lambda hit: -hit.score)
        return hits[:top_k]

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
            return index

    @staticmethod
    def _wrong_model(archive_id: str, model: str | None, dim: int, embedder: Embedder
                     ) -> EmbeddingMismatchError:
        return EmbeddingMismatchError(
            f"archive {archive_id!r} was embedded with {model!r} ({dim} dims); its embedding "
            f"model is {embedder.model!r}. Use the same embedding model or re-embed the "
            "archive.")

    async def _load(self, index: VectorIndex | None, archive_id: str) -> VectorIndex | None:
        """Add the rows stored after ``index.loaded_until`` (all rows for a new index)."""
        import numpy as np  # lazy: numpy, for vector search only

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


class _Queries:
    """One search's query, embedded once per model it meets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._vectors: dict[int, Any] = {}

    async def vector(self, embedder: Embedder) -> Any:
        found = self._vectors.get(id(embedder))
        if found is None:
            found = self._vectors[id(embedder)] = (await embedder.embed([self.text]))[0]
        return found
