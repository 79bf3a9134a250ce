"""Archival search on PostgreSQL: pgvector (HNSW, in SQL) against today's in-memory exact search.

Both run over the same passages in one database: one store searches with pgvector, a second
store on the same database is told it has none, so ``ArchivalMemory`` loads the archive into
a ``VectorIndex`` and searches in process (the path without the extension). Queries are
interleaved one by one and each side's median is compared (ratio = pgvector / in-memory).
Each ``--n`` reports: the time to migrate an archive from before pgvector (revision 0016:
backfill the vector column, build the index), the cost of one more insert, the in-memory
side's first (loading) search, p50/p99 of ``ArchivalMemory.search`` for top-10 with no
filter and with a tag held by 20% of passages, and recall@10 against the exact answer.

Vectors: "clustered" mimics text embeddings (passages near one of n/100 topics; queries near
a topic), "random" is i.i.d. normal, the worst case for any graph index.

    python bench/pgvector_search.py [--n 10000 100000] [--queries 100] [--data clustered]
                                    [--ef-search 40 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import create_engine

from stateloop.memory.archival import ArchivalMemory, PassageHit
from stateloop.store import AgentRecord, PassageRecord, open_store
from stateloop.store.migrate import upgrade
from stateloop.store.url import resolve_url

DIM = 384
TAGS = ["work", "home", "travel", "health", "money"]


class FixedEmbedder:
    """Returns the query vector set last, so the search is timed without a model."""

    model, dim = "bench-384", DIM

    def __init__(self) -> None:
        self.next = np.zeros(DIM, dtype=np.float32)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.repeat(self.next.reshape(1, -1), len(texts), axis=0)


def vectors(kind: str, n: int, queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "random":
        return (rng.normal(size=(n, DIM)).astype(np.float32),
                rng.normal(size=(queries, DIM)).astype(np.float32))
    topics = rng.normal(size=(max(1, n // 100), DIM))
    data = topics[rng.integers(len(topics), size=n)] + 0.6 * rng.normal(size=(n, DIM))
    asked = topics[rng.integers(len(topics), size=queries)] + 0.6 * rng.normal(
        size=(queries, DIM))
    return data.astype(np.float32), asked.astype(np.float32)


def pct(samples: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def fill(url: str, matrix: np.ndarray) -> str:
    """A database at revision 0015 (before pgvector) holding one agent's archive of
    ``matrix``; the agent's id."""
    engine = create_engine(resolve_url(url).sync_url())
    with engine.connect() as conn, conn.begin():
        upgrade(conn, url, "0015")
    engine.dispose()
    store = await open_store(url, migrate=False)
    agent = await store.create_agent(AgentRecord(name="bench"))
    archive_id = await store.default_archive(agent.id)
    for begin in range(0, len(matrix), 10_000):
        await store.insert_passages(archive_id, [
            PassageRecord(archive_id, f"passage {i}", embedding=matrix[i],
                          embedding_model=FixedEmbedder.model, tags=[TAGS[i % 5]],
                          created_at=float(i))
            for i in range(begin, min(begin + 10_000, len(matrix)))])
    await store.close()
    return agent.id


async def compare(url: str, agent_id: str, queries: np.ndarray, tags: list[str] | None,
                  ef_search: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:  # as autovacuum would, in time
        conn.execute("ANALYZE passages")
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET hnsw.ef_search = {ef_search}")
    label = f"ef_search={ef_search} " + ("top-10" if tags is None else f"top-10 tags={tags}")
    vec_store = await open_store(url)
    mem_store = await open_store(url)
    mem_store.searches_vectors = False  # as without the extension: search in memory
    embedder = FixedEmbedder()
    sides = {"pgvector": ArchivalMemory(vec_store, embedder),
             "in-memory": ArchivalMemory(mem_store, embedder)}
    assert vec_store.searches_vectors

    async def search(name: str, q: np.ndarray) -> list[PassageHit]:
        embedder.next = q
        return await sides[name].search(agent_id, "q", top_k=10, tags=tags)

    started = time.perf_counter()
    await search("in-memory", queries[0])
    load = time.perf_counter() - started
    await search("pgvector", queries[0])
    times: dict[str, list[float]] = {"pgvector": [], "in-memory": []}
    found = 0
    for q in queries:
        hits = {}
        for name in ("in-memory", "pgvector"):
            start = time.perf_counter()
            hits[name] = await search(name, q)
            times[name].append((time.perf_counter() - start) * 1000)
        exact = {h.passage.id for h in hits["in-memory"]}
        found += len(exact & {h.passage.id for h in hits["pgvector"]})
    (p50, p99), (b50, b99) = pct(times["pgvector"]), pct(times["in-memory"])
    print(f"  {label:<36} pgvector p50 {p50:7.2f} p99 {p99:7.2f} | in-memory p50 {b50:7.2f} "
          f"p99 {b99:7.2f} ms | ratio {p50 / b50:5.2f}x | recall@10 "
          f"{found / (10 * len(queries)):.3f} | in-memory first search {load:.2f} s")
    await vec_store.close()
    await mem_store.close()


async def one_size(server: Any, n: int, kind: str, queries: int, number: int,
                   efs: list[int]) -> None:
    name = f"bench{number}"
    server.psql(f"CREATE DATABASE {name}")
    url = str(server.get_uri(name))
    matrix, asked = vectors(kind, n, queries)
    started = time.perf_counter()
    agent_id = await fill(url, matrix)
    filled = time.perf_counter() - started
    started = time.perf_counter()
    store = await open_store(url)  # revision 0016: backfill the column, build the index
    migrated = time.perf_counter() - started
    archive_id = next(iter(await store.passage_models(agent_id=agent_id)))
    extra = [PassageRecord(archive_id, f"more {i}", embedding=asked[i % len(asked)],
                           embedding_model=FixedEmbedder.model) for i in range(200)]
    started = time.perf_counter()
    for passage in extra:
        await store.insert_passages(archive_id, [passage])
    one = (time.perf_counter() - started) / len(extra) * 1000
    await store.close()
    print(f"n={n} {kind}: stored (no vectors) {filled:.1f} s; migration 0016 (backfill + "
          f"HNSW build) {migrated:.1f} s; one more insert {one:.2f} ms")
    for ef_search in efs:
        await compare(url, agent_id, asked, None, ef_search)
        await compare(url, agent_id, asked, ["work"], ef_search)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--data", choices=["clustered", "random"], nargs="+",
                        default=["clustered", "random"])
    parser.add_argument("--ef-search", type=int, nargs="+", default=[40, 100])
    args = parser.parse_args()
    import pgserver

    folder = tempfile.mkdtemp(prefix="stateloop-bench-pg-")
    server = pgserver.get_server(folder, cleanup_mode="delete")
    for setting in ("fsync = off", "synchronous_commit = off", "maintenance_work_mem = '512MB'"):
        server.psql(f"ALTER SYSTEM SET {setting}")
    server.psql("SELECT pg_reload_conf()")
    try:
        number = 0
        for n in args.n:
            for kind in args.data:
                number += 1
                asyncio.run(one_size(server, n, kind, args.queries, number, args.ef_search))
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
