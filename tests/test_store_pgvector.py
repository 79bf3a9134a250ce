"""Archival search in pgvector on PostgreSQL: the vector column and its HNSW index, nearest
neighbours in SQL ranked as the exact in-memory search ranks them, the planner walking the
index over a big archive, the server's search routes, and databases where the extension may
not be created (exact search in memory, then pgvector at the first open once it exists)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
import pytest
from letta_client import Letta
from sqlalchemy import column, create_engine, event, insert, inspect, table

from conftest import raw_sql
from fake_script import Script
from stateloop.memory.archival import ArchivalMemory
from stateloop.memory.vectors import VectorIndex
from stateloop.store import AgentRecord, PassageRecord, StoreError, open_store, pgvector, schema
from stateloop.store import rows as store_rows
from stateloop.store.migrate import upgrade
from stateloop.store.records import ArchiveRecord
from stateloop.store.sql import SqlStore
from stateloop.store.url import resolve_url
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, new_agent, settings_for

Factory = Callable[..., str]
COLORS = ["red", "green", "blue", "black", "white"]
T0 = 1_700_000_000.0
# The planner's other ways to order rows, switched off: only the HNSW index is left.
ONLY_THE_INDEX = "&options=" + quote("-c enable_seqscan=off -c enable_sort=off "
                                     "-c enable_bitmapscan=off")


class FixedEmbedder:
    """Embeds every query as the vector the test sets next."""

    def __init__(self, dim: int) -> None:
        self.model, self.dim = f"random-{dim}", dim
        self.next: np.ndarray | None = None

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        assert self.next is not None
        return np.repeat(self.next.reshape(1, -1), len(texts), axis=0)


def _data(n: int, dim: int, seed: int) -> tuple[np.ndarray, list[list[str]]]:
    matrix = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return matrix, [[COLORS[i % 5]] + (["big"] if i % 7 == 0 else []) for i in range(n)]


async def _archive_of(store: SqlStore, matrix: np.ndarray, tags: list[list[str]],
                      model: str, agent: AgentRecord | None = None) -> tuple[str, list[str]]:
    """An agent's archive of the rows; ``agent`` already stored, or a new one."""
    agent = agent or await store.create_agent(AgentRecord(name="keeper"))
    archive_id = await store.default_archive(agent.id)
    stored = await store.insert_passages(archive_id, [
        PassageRecord(archive_id, f"passage {i}", embedding=row, embedding_model=model,
                      tags=tags[i], created_at=T0 + i) for i, row in enumerate(matrix)])
    return agent.id, [p.id for p in stored]


def _exact(ids: list[str], matrix: np.ndarray, tags: list[list[str]]) -> VectorIndex:
    index = VectorIndex(matrix.shape[1])
    index.add(ids, matrix, tags=tags, created_at=[T0 + i for i in range(len(ids))])
    return index


def _statements(store: SqlStore) -> list[tuple[str, Any]]:
    """Every nearest-neighbour statement the store sends from now on, as sent."""
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if "<=>" in statement:
            seen.append((statement, params))

    event.listen(store._runner.engine, "before_cursor_execute", record)  # type: ignore[attr-defined]
    return seen


def _plan(url: str, statement: str, params: Any) -> str:
    import psycopg

    with psycopg.connect(url) as conn:
        pgvector.adapt_psycopg(conn)
        return "\n".join(row[0] for row in conn.execute("EXPLAIN " + statement, params))


# (tags, tag_match_mode, start offset, end offset): filters as the archival tools pass them
FILTERS: list[tuple[list[str] | None, str, float | None, float | None]] = [
    (None, "any", None, None), (["red", "big"], "any", None, None),
    (["green", "big"], "all", None, None), (None, "any", 40, 180), (["blue"], "any", 100, None)]


@pytest.mark.parametrize("dim", [384, 1536])
async def test_nearest_neighbours_in_sql_are_the_exact_search_results(
        pg_database: Factory, dim: int) -> None:
    url = pg_database() + ONLY_THE_INDEX
    matrix, tags = _data(300, dim, seed=dim)
    store = await open_store(url)
    try:
        assert store.searches_vectors
        embedder = FixedEmbedder(dim)
        agent_id, ids = await _archive_of(store, matrix, tags, embedder.model)
        exact, archival = _exact(ids, matrix, tags), ArchivalMemory(store, embedder)
        sent = _statements(store)
        queries = np.random.default_rng(1).normal(size=(4, dim)).astype(np.float32)
        for query in queries:
            embedder.next = query
            for tag_list, mode, start, end in FILTERS:
                hits = await archival.search(
                    agent_id, "q", tags=tag_list, tag_match_mode=mode, top_k=10,
                    start_datetime=None if start is None else T0 + start,
                    end_datetime=None if end is None else T0 + end)
                want = exact.search(query, 10, tags=tag_list, tag_match_mode=mode,
                                    start=None if start is None else T0 + start,
                                    end=None if end is None else T0 + end)
                assert [h.passage.id for h in hits] == [w.id for w in want]
                assert [h.score for h in hits] == pytest.approx([w.score for w in want],
                                                                abs=1e-5)
        assert archival._indexes == {}  # nothing was loaded into this process
        plan = _plan(url, *sent[0])
        # 384 dimensions walk the HNSW graph; other sizes are scanned (no index fits them)
        assert (f"Index Scan using {pgvector.INDEX}" in plan) == (dim == 384), plan
    finally:
        await store.close()


async def test_a_big_archive_from_before_pgvector_is_filled_and_searched_by_the_index(
        pg_database: Factory) -> None:
    url = pg_database(migrated=False)
    engine = create_engine(resolve_url(url).sync_url())
    keeper = AgentRecord(name="keeper")
    with engine.connect() as conn, conn.begin():  # a database from before revision 0016
        upgrade(conn, url, "0015")
        # The agent and its archive as that revision stored them (no column added since).
        archive = ArchiveRecord(name="keeper's Archive")
        for name, values in (("agents", store_rows.agent_values(keeper)),
                             ("archives", dataclasses.asdict(archive))):
            then = {column["name"] for column in inspect(conn).get_columns(name)}
            columns = (column(n, schema.metadata.tables[name].c[n].type) for n in then)
            conn.execute(insert(table(name, *columns)).values(
                {k: v for k, v in values.items() if k in then}))
        conn.execute(insert(schema.archives_agents).values(
            agent_id=keeper.id, archive_id=archive.id, is_owner=True, created_at=T0))
    engine.dispose()
    matrix, tags = _data(5000, 384, seed=5)
    old = await open_store(url, migrate=False)
    try:
        assert not old.searches_vectors  # not migrated yet: its passages have no vectors
        agent_id, ids = await _archive_of(old, matrix, tags, "random-384", keeper)
    finally:
        await old.close()

    store = await open_store(url)  # revision 0016: the column filled from the blobs, indexed
    try:
        assert store.searches_vectors
        assert raw_sql(store, "SELECT count(*) FROM passages WHERE embedding_vector IS NOT "
                              "NULL") == [(5000,)]
        raw_sql(store, "ANALYZE passages")
        archive_id = (await store.passage_models(agent_id=agent_id)).popitem()[0]
        sent = _statements(store)
        query = np.random.default_rng(2).normal(size=384).astype(np.float32)
        hits = await store.nearest_passages([archive_id], query, top_k=10)
        assert f"Index Scan using {pgvector.INDEX}" in _plan(url, *sent[0])
        # Every score is that passage's own cosine similarity, best first.
        unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        cosine = unit @ (query / np.linalg.norm(query))
        scores = [score for _, score in hits]
        assert scores == sorted(scores, reverse=True) and len(hits) == 10
        assert scores == pytest.approx([cosine[ids.index(p.id)] for p, _ in hits], abs=1e-5)
        # Fewer rows pass the filter than asked for: an exact pass makes sure none is missed.
        few = ["green", "big"]  # every 35th row: 143 of them
        hits = await store.nearest_passages([archive_id], query, top_k=200, tags=few,
                                            tag_match_mode="all")
        want = _exact(ids, matrix, tags).search(query, 200, tags=few, tag_match_mode="all")
        assert [p.id for p, _ in hits] == [w.id for w in want] and len(want) == 143
    finally:
        await store.close()


async def test_passages_a_process_from_before_pgvector_adds_are_filled_at_the_next_open(
        pg_database: Factory) -> None:
    url = pg_database()
    matrix, tags = _data(50, 384, seed=4)
    store = await open_store(url)
    try:
        agent_id, ids = await _archive_of(store, matrix, tags, "random-384")
        [archive_id] = await store.passage_models(agent_id=agent_id)
        # What such a process writes (during a rolling upgrade): the blob alone.
        raw_sql(store, "UPDATE passages SET embedding_vector = NULL WHERE id = ?", (ids[7],))
        [(hit, _)] = await store.nearest_passages([archive_id], matrix[7], top_k=1)
        assert hit.id != ids[7]
    finally:
        await store.close()
    store = await open_store(url)
    try:
        [(hit, score)] = await store.nearest_passages([archive_id], matrix[7], top_k=1)
        assert hit.id == ids[7] and score == pytest.approx(1.0, abs=1e-6)
        for row in (7, 8):  # filled at open, and stored by insert_passages: the same floats
            [(stored,)] = raw_sql(store, "SELECT embedding_vector::text FROM passages "
                                         "WHERE id = ?", (ids[row],))
            assert np.array_equal(np.array(stored.strip("[]").split(","), dtype=np.float32),
                                  matrix[row])
    finally:
        await store.close()


async def test_the_operators_ef_search_holds_unless_more_hits_are_asked_for(
        pg_database: Factory) -> None:
    store = await open_store(pg_database() + "&options=" + quote("-c hnsw.ef_search=77"))
    try:
        def settings(top_k: int) -> Any:
            def txn(conn: Any) -> Any:
                pgvector.search_settings(conn, top_k)
                return conn.exec_driver_sql(
                    "SELECT current_setting('hnsw.ef_search'), "
                    "current_setting('hnsw.iterative_scan')").one()
            return store._runner.read(txn)

        assert tuple(await settings(10)) == ("77", "strict_order")
        assert tuple(await settings(300)) == ("300", "strict_order")
    finally:
        await store.close()


def test_the_server_searches_archival_memory_with_pgvector(pg_database: Factory,
                                                            tmp_path: Any) -> None:
    url = pg_database()
    with FakeOpenAI(Script(), embedding_dimensions=384) as fake, \
            Server(settings_for(fake, tmp_path / "unused.db", database_url=url)) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
        agent = new_agent(client)
        texts = ["Ada owns the release.", "The office is in Lisbon.", "Zebras have stripes."]
        ids = [client.agents.passages.create(agent.id, text=text)[0].id for text in texts]
        found = httpx.get(f"{server.url}/v1/agents/{agent.id}/archival-memory/search",
                          params={"query": "where is the office"}).json()["results"]
        assert found[0]["content"] == "The office is in Lisbon."
        # Searches read the vector column, not the blob: point the zebras where Ada points.
        _admin(url, "UPDATE passages SET embedding_vector = (SELECT embedding_vector FROM "
                    f"passages WHERE id = '{ids[0]}') WHERE id = '{ids[2]}'")
        hits = client.passages.search(agent_id=agent.id, query="Ada owns the release.")
        assert {h.passage.id for h in hits[:2]} == {ids[0], ids[2]}
        assert [round(h.score, 4) for h in hits[:2]] == [1.0, 1.0]


def _admin(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)  # type: ignore[arg-type]


async def test_without_the_right_to_create_pgvector_search_stays_exact_in_memory(
        pg_server: Any, caplog: pytest.LogCaptureFixture) -> None:
    import psycopg

    admin = pg_server.get_uri("postgres")
    try:
        _admin(admin, "CREATE ROLE stateloop_plain LOGIN")
    except psycopg.errors.DuplicateObject:
        pass
    _admin(admin, "DROP DATABASE IF EXISTS plain_owned WITH (FORCE)",
           "CREATE DATABASE plain_owned OWNER stateloop_plain")
    url = str(pg_server.get_uri("plain_owned")).replace("postgres:@", "stateloop_plain:@", 1)
    matrix, tags = _data(300, 384, seed=9)
    embedder = FixedEmbedder(384)
    query = np.random.default_rng(3).normal(size=384).astype(np.float32)
    try:
        with caplog.at_level(logging.WARNING, logger="stateloop.store"):
            store = await open_store(url)  # migrated by its owner, who may not add pgvector
        try:
            [line] = [r.getMessage() for r in caplog.records if "pgvector" in r.getMessage()]
            assert "exact, in memory" in line and "permission denied" in line
            assert "stateloop_plain" in line and "plain_owned" in line
            assert not store.searches_vectors
            assert raw_sql(store, "SELECT count(*) FROM pg_attribute WHERE attrelid = "
                                  "'passages'::regclass AND attname = 'embedding_vector'") == [(0,)]
            agent_id, ids = await _archive_of(store, matrix, tags, embedder.model)
            archival = ArchivalMemory(store, embedder)
            embedder.next = query
            hits = await archival.search(agent_id, "q", top_k=10)
            assert [h.passage.id for h in hits] == [
                w.id for w in _exact(ids, matrix, tags).search(query, 10)]
            assert archival._indexes  # searched in memory
        finally:
            await store.close()

        _admin(str(pg_server.get_uri("plain_owned")), "CREATE EXTENSION vector")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="stateloop.store"):
            store = await open_store(url)  # the next open finds it and moves the vectors in
        try:
            assert store.searches_vectors and not caplog.records
            archival = ArchivalMemory(store, embedder)
            again = await archival.search(agent_id, "q", top_k=10)
            assert [h.passage.id for h in again] == [h.passage.id for h in hits]
            assert archival._indexes == {}
        finally:
            await store.close()
    finally:
        _admin(admin, "DROP DATABASE IF EXISTS plain_owned WITH (FORCE)")


async def test_sqlite_never_asks_for_pgvector(tmp_path: Any) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        assert not store.searches_vectors
        with pytest.raises(StoreError, match="needs PostgreSQL with pgvector"):
            await store.nearest_passages(["archive-x"], [1.0, 0.0])
    finally:
        await store.close()
