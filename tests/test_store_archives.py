"""Archives in the store: revision 0010 moves each agent's passages into an archive it owns
(and back on downgrade); archives shared between agents through ArchivalMemory."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event

from conftest import DIALECTS, database_url
from stateloop.memory.archival import ArchivalMemory
from stateloop.store import AgentRecord, ArchiveRecord, NotFoundError, open_store
from stateloop.store.dialect import begin_sqlite, configure_sqlite_connection
from stateloop.store.migrate import _alembic_config, upgrade
from stateloop.store.sql import SqlStore
from test_store_passages import HashEmbedder


def _migrate(path: Path, revision: str, *, down: bool = False) -> None:
    from alembic import command

    engine = create_engine(f"sqlite:///{path}")
    event.listen(engine, "connect", lambda conn, _rec: configure_sqlite_connection(conn))
    event.listen(engine, "begin", begin_sqlite)
    with engine.connect() as conn:
        conn = conn.execution_options(stateloop_write=True)
        with conn.begin():
            if down:
                command.downgrade(_alembic_config(conn), revision)
            else:
                upgrade(conn, str(path), revision)
    engine.dispose()


async def test_revision_0010_gives_each_agent_an_archive_of_its_passages_and_back(
        tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _migrate(path, "0009")
    with sqlite3.connect(path) as raw:
        for n in (1, 2):
            raw.execute(
                "INSERT INTO agents (id, name, agent_type, system, llm_config, embedding_config,"
                " tool_rules, tool_names, metadata, in_context_message_ids, "
                "message_buffer_autoclear, enable_sleeptime, extra, created_at, updated_at) "
                f"VALUES ('agent-{n}', 'a{n}', 'memgpt_agent', 'sys', '{{}}', '{{}}', '[]', "
                "'[]', '{}', '[]', 0, 0, '{}', 1.0, 1.0)")
        vector = bytes(4 * 3)
        raw.executemany(
            "INSERT INTO passages (id, agent_id, text, embedding, embedding_model, "
            "embedding_dim, tags, metadata, created_at) VALUES (?, ?, ?, ?, 'm', 3, '[\"t\"]',"
            " '{}', 1.0)",
            [("passage-1", "agent-1", "one", vector), ("passage-2", "agent-2", "two", vector),
             ("passage-3", "agent-1", "three", vector)])

    store = await open_store(f"sqlite:///{path}")
    try:
        assert await store.agent_archive_ids("agent-1") == ["archive-1"]
        archive = await store.get_archive("archive-1")
        assert (archive.name, archive.vector_db_provider) == ("a1's Archive", "native")
        texts = [p.text for p in await store.list_passages(["archive-1"])]
        assert texts == ["one", "three"]
        assert await store.count_passages("agent-2") == 1
        assert (await store.get_passages(["passage-3"]))[0].tags == ["t"]
        # a shared archive: agent-2 reaches archive-1 too; an archive no agent uses
        await store.attach_archive("agent-2", "archive-1")
        await store.create_archive(ArchiveRecord(name="loose", id="archive-loose"))
    finally:
        await store.close()

    _migrate(path, "0009", down=True)
    with sqlite3.connect(path) as raw:
        back = raw.execute("SELECT seq, id, agent_id, text FROM passages ORDER BY seq").fetchall()
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master")}
    assert back == [(1, "passage-1", "agent-1", "one"), (2, "passage-2", "agent-2", "two"),
                    (3, "passage-3", "agent-1", "three")]  # to the owner, seq kept
    assert "archives" not in tables and "archives_agents" not in tables

    store = await open_store(f"sqlite:///{path}")  # and up again
    try:
        assert await store.count_passages("agent-1") == 2
    finally:
        await store.close()


@pytest.fixture(params=DIALECTS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await open_store(database_url(request.param, tmp_path, request))
    yield s
    await s.close()


async def test_agents_sharing_an_archive_find_each_others_passages(store: SqlStore) -> None:
    one = (await store.create_agent(AgentRecord(name="one"))).id
    two = (await store.create_agent(AgentRecord(name="two"))).id
    first, second = ArchivalMemory(store, HashEmbedder()), ArchivalMemory(store, HashEmbedder())
    await first.insert(one, "the launch is on tuesday")
    [own] = await store.agent_archive_ids(one)
    assert (await store.get_archive(own)).name == "one's Archive"
    assert await second.search(two, "launch") == []  # made lazily, not shared yet

    await store.attach_archive(two, own)
    await second.search(two, "launch")  # its index of the archive is loaded
    await first.insert(one, "the launch moved to friday")
    hits = await second.search(two, "launch friday", top_k=1)
    assert [h.passage.text for h in hits] == ["the launch moved to friday"]
    await second.insert(two, "budget approved")  # two has no archive of its own: the shared
    assert await store.count_passages(one) == 3

    await store.detach_archive(two, own)
    assert await second.search(two, "launch") == []
    assert await store.count_passages(one) == 3  # access went, data stayed
    await store.delete_agent(one)  # as in Letta, its archive stays
    assert (await store.get_archive(own)).id == own
    assert await store.archive_agent_ids(own) == []
    await store.delete_archive(own)
    with pytest.raises(NotFoundError):
        await store.get_archive(own)
    assert await store.list_passages([own]) == []
