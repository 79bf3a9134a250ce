"""Archival passages: storage, model consistency, exact vector search, the archival service."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from conftest import DIALECTS, database_url
from stateloop.memory.archival import ArchivalMemory
from stateloop.memory.embeddings import EmbeddingError
from stateloop.memory.vectors import VectorIndex
from stateloop.store import AgentRecord, EmbeddingMismatchError, PassageRecord, open_store
from stateloop.store.sql import SqlStore


class HashEmbedder:
    """Deterministic bag-of-words vectors: texts sharing words are close."""

    def __init__(self, model: str = "hash-1024", dim: int = 1024) -> None:
        self.model, self.dim = model, dim

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


@pytest.fixture(params=DIALECTS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await open_store(database_url(request.param, tmp_path, request))
    yield s
    await s.close()


def _brute_force(matrix: np.ndarray, query: np.ndarray, k: int, keep: np.ndarray) -> list[int]:
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    scores = np.where(keep, unit @ (query / np.linalg.norm(query)), -np.inf)
    order = np.argsort(-scores, kind="stable")[:k]
    return [int(i) for i in order if scores[i] > -np.inf]


def test_vector_index_matches_brute_force_with_filters() -> None:
    rng = np.random.default_rng(7)
    n, dim = 3000, 48
    matrix = rng.normal(size=(n, dim)).astype(np.float32)
    created = np.arange(n, dtype=np.float64)
    tag_pool = ["red", "green", "blue"]
    tags = [[tag_pool[i % 3]] + (["big"] if i % 5 == 0 else []) for i in range(n)]
    index = VectorIndex(dim, "test", capacity=16)  # forces several doublings
    for start in range(0, n, 500):
        index.add([f"p{i}" for i in range(start, start + 500)], matrix[start:start + 500],
                  tags=tags[start:start + 500], created_at=created[start:start + 500])
    for _ in range(5):
        query = rng.normal(size=dim).astype(np.float32)
        every = np.ones(n, dtype=bool)
        assert [h.id for h in index.search(query, 10)] == [
            f"p{i}" for i in _brute_force(matrix, query, 10, every)]
        red_or_big = np.array([("red" in t) or ("big" in t) for t in tags])
        assert [h.id for h in index.search(query, 7, tags=["red", "big"])] == [
            f"p{i}" for i in _brute_force(matrix, query, 7, red_or_big)]
        red_and_big = np.array([("red" in t) and ("big" in t) for t in tags])
        assert [h.id for h in index.search(query, 7, tags=["red", "big"],
                                           tag_match_mode="all")] == [
            f"p{i}" for i in _brute_force(matrix, query, 7, red_and_big)]
        window = (created >= 100) & (created <= 200)
        assert [h.id for h in index.search(query, 5, start=100, end=200)] == [
            f"p{i}" for i in _brute_force(matrix, query, 5, window)]
    index.remove(["p0", "p1"])
    assert len(index) == n - 2
    assert "p0" not in {h.id for h in index.search(matrix[0], 3)}
    assert index.search(matrix[0], 5, tags=["nope"]) == []
    with pytest.raises(EmbeddingMismatchError, match="48"):
        index.search(np.ones(10), 3)


async def test_passages_store_and_refuse_mixed_models(store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    archive_id = await store.default_archive(agent_id)
    first = PassageRecord(archive_id, "alpha", embedding=[1.0, 0.0, 0.0], embedding_model="m1",
                          tags=["x"])
    await store.insert_passages(archive_id, [first])
    assert await store.archive_model(archive_id) == ("m1", 3)
    with pytest.raises(EmbeddingMismatchError, match=r"'m1' \(3 dims\).*'m2'"):
        await store.insert_passages(archive_id, [
            PassageRecord(archive_id, "beta", embedding=[0.0, 1.0, 0.0], embedding_model="m2")])
    with pytest.raises(EmbeddingMismatchError, match="4 dims"):
        await store.insert_passages(archive_id, [
            PassageRecord(archive_id, "gamma", embedding=[0.0] * 4, embedding_model="m1")])
    with pytest.raises(EmbeddingMismatchError):  # mixed inside one batch
        await store.insert_passages(archive_id, [
            PassageRecord(archive_id, "d", embedding=[1.0, 0, 0], embedding_model="m1"),
            PassageRecord(archive_id, "e", embedding=[1.0, 0], embedding_model="m3")])
    assert await store.count_passages(agent_id) == 1
    [back] = await store.list_passages([archive_id])
    assert (back.text, back.tags, back.embedding) == ("alpha", ["x"], [1.0, 0.0, 0.0])
    assert await store.delete_passages([first.id]) == 1
    assert await store.count_passages(agent_id) == 0


async def test_archival_memory_insert_and_search(store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    archive = ArchivalMemory(store, HashEmbedder())
    await archive.insert(agent_id, "the user likes green tea", tags=["prefs"])
    await archive.insert(agent_id, ["meeting with bob on monday", "bob likes coffee"],
                         tags=["people"])
    hits = await archive.search(agent_id, "what tea does the user like", top_k=2)
    assert hits[0].passage.text == "the user likes green tea"
    assert hits[0].score > hits[1].score
    tagged = await archive.search(agent_id, "likes", tags=["people"], top_k=5)
    assert {h.passage.text for h in tagged} == {"meeting with bob on monday", "bob likes coffee"}

    # a second process (another ArchivalMemory) sees rows added after its index was built
    other = ArchivalMemory(store, HashEmbedder())
    assert len(await other.search(agent_id, "bob", top_k=10)) == 3
    await archive.insert(agent_id, "bob moved to lisbon")
    assert (await other.search(agent_id, "lisbon", top_k=1))[0].passage.text == \
        "bob moved to lisbon"
    await other.delete([hits[0].passage.id])
    assert "the user likes green tea" not in {
        h.passage.text for h in await archive.search(agent_id, "green tea", top_k=10)}

    future = datetime(2100, 1, 1, tzinfo=UTC)
    assert await archive.search(agent_id, "bob", start_datetime=future) == []
    assert len(await archive.search(agent_id, "bob", end_datetime="2100-01-01")) == 3


async def test_an_archive_is_embedded_with_its_own_model_not_the_callers(
        store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    await ArchivalMemory(store, HashEmbedder("model-a")).insert(agent_id, "hello world")
    [archive_id] = await store.agent_archive_ids(agent_id)
    assert (await store.get_archive(archive_id)).embedding_config["embedding_model"] == "model-a"
    # model-b's embedder never writes to or queries model-a's archive; model-a is not to be
    # had here, which is said by name
    other = ArchivalMemory(store, HashEmbedder("model-b"))
    with pytest.raises(EmbeddingError, match=r"'hugging-face/model-a' cannot be made here"):
        await other.insert(agent_id, "hi")
    with pytest.raises(EmbeddingError, match=r"'hugging-face/model-a' cannot be made here"):
        await other.search(agent_id, "hi")
    assert await store.count_passages(agent_id) == 1
    # the store refuses another model's vectors in it all the same
    with pytest.raises(EmbeddingMismatchError, match=r"'model-a'.*'model-b'"):
        await store.insert_passages(archive_id, [PassageRecord(
            archive_id=archive_id, text="x", embedding=[1.0] * 8, embedding_model="model-b")])


async def test_archival_text_holding_a_lone_surrogate_is_refused_by_name(store: SqlStore) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    archive = ArchivalMemory(store, HashEmbedder())
    with pytest.raises(ValueError, match=r"archival text 1 holds a lone surrogate"):
        await archive.insert(agent_id, ["fine", "broken \ud800"])
    with pytest.raises(ValueError, match=r"archival text holds a lone surrogate"):
        await archive.insert(agent_id, "\udfff")
    assert await store.count_passages(agent_id) == 0  # nothing of the batch was taken
