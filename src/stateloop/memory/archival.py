"""Archival memory: passages stored by the store, searched by meaning in memory.

One ``VectorIndex`` per agent, loaded from the store on first search, appended to on
insert, and caught up by ``seq`` with rows other processes added: no query reloads the
archive. Rows deleted elsewhere are dropped when a search meets them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

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
    """``insert`` and ``search`` over each agent's archive with one embedder."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._indexes: dict[str, VectorIndex] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def insert(self, agent_id: str, content: str | Sequence[str],
                     tags: Sequence[str] | None = None) -> list[PassageRecord]:
        """Embed and store one text (or several), tagged; the index grows in place."""
        texts = [content] if isinstance(content, str) else list(content)
        for number, text in enumerate(texts):
            check(text, "archival text" if len(texts) == 1 else f"archival text {number}")
        await self._check_model(agent_id)
        vectors = await self.embedder.embed(texts)
        passages = [PassageRecord(agent_id=agent_id, text=text, embedding=vector,
                                  embedding_model=self.embedder.model,
                                  embedding_dim=int(vectors.shape[1]), tags=list(tags or ()))
                    for text, vector in zip(texts, vectors, strict=True)]
        stored = await self.store.insert_passages(agent_id, passages)
        index = self._indexes.get(agent_id)
        if index is not None and stored:
            index.add([p.id for p in stored], vectors, tags=[p.tags for p in stored],
                      created_at=[p.created_at for p in stored])
        return stored

    async def search(self, agent_id: str, query: str, *, tags: Sequence[str] | None = None,
                     tag_match_mode: str = "any", top_k: int = 10,
                     start_datetime: TimeLike | None = None,
                     end_datetime: TimeLike | None = None) -> list[PassageHit]:
        """The passages closest in meaning to ``query``, best first, after tag/date filters."""
        index = await self._index(agent_id)
        if index is None:
            return []
        vector = (await self.embedder.embed([query]))[0]
        start, end = to_epoch(start_datetime), to_epoch(end_datetime, end_of_day=True)
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

    async def _check_model(self, agent_id: str) -> None:
        stored = await self.store.archive_model(agent_id)
        if stored is not None and stored[0] != self.embedder.model:
            raise EmbeddingMismatchError(
                f"archive of agent {agent_id!r} was embedded with {stored[0]!r} ({stored[1]} "
                f"dims); this embedder is {self.embedder.model!r}. Use the same embedding "
                "model or re-embed the archive.")

    async def _index(self, agent_id: str) -> VectorIndex | None:
        async with self._locks.setdefault(agent_id, asyncio.Lock()):
            newest = await self.store.passage_watermark(agent_id)
            index = self._indexes.get(agent_id)
            if index is None or index.loaded_until < newest:
                index = await self._load(index, agent_id)
                if index is None:
                    return None
                index.loaded_until = newest
                self._indexes[agent_id] = index
            if index.model != self.embedder.model:
                raise EmbeddingMismatchError(
                    f"archive of agent {agent_id!r} was embedded with {index.model!r} "
                    f"({index.dim} dims); this embedder is {self.embedder.model!r}. Use the "
                    "same embedding model or re-embed the archive.")
            return index

    async def _load(self, index: VectorIndex | None, agent_id: str) -> VectorIndex | None:
        """Add the rows stored after ``index.loaded_until`` (all rows for a new index)."""
        import numpy as np

        batch = await self.store.load_vectors(
            agent_id, after_seq=index.loaded_until if index is not None else 0)
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
