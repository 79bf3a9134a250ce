"""PostgreSQL as the store's second dialect: the migrations (up from every old revision, down
and up again), the schema they make, processes that open one database together, recall."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import create_engine

from stateloop.messages import Usage, user
from stateloop.store import AgentRecord, StepRecord, open_store, pgvector
from stateloop.store.migrate import HEAD, known_revisions, upgrade
from stateloop.store.records import APPEND, ToolRecord
from stateloop.store.schema import metadata
from stateloop.store.url import resolve_url

Factory = Callable[..., str]


def _migrate(url: str, revision: str, down: bool = False) -> None:
    engine = create_engine(resolve_url(url).sync_url())
    try:
        with engine.connect() as conn, conn.begin():
            if down:
                from alembic import command

                from stateloop.store.migrate import _alembic_config

                command.downgrade(_alembic_config(conn), revision)
            else:
                upgrade(conn, url, revision)
    finally:
        engine.dispose()


def _run(url: str, *statements: str) -> Any:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        found = None
        for sql in statements:
            cursor = conn.execute(sql)  # type: ignore[arg-type]
            found = cursor.fetchall() if cursor.description else None
        return found


@pytest.mark.filterwarnings("ignore:Did not recognize type 'vector'")
async def test_an_empty_database_migrates_to_head_and_matches_the_schema(
        pg_database: Factory) -> None:
    url = pg_database(migrated=False)
    await (await open_store(url)).close()
    assert _run(url, "SELECT version_num FROM alembic_version") == [(HEAD,)]

    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    def include(obj: object, name: str | None, type_: str, *_: object) -> bool:
        if name in (pgvector.COLUMN, pgvector.INDEX, pgvector.UNFILLED):  # test_store_pgvector
            return False
        return not (type_ == "index" and name is not None and name.startswith("ix_messages_recall"))

    engine = create_engine(resolve_url(url).sync_url())
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"include_object": include})
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()


@pytest.mark.parametrize("revision", ["0001", "0008"])
async def test_data_from_an_old_revision_survives_every_migration(
        pg_database: Factory, revision: str) -> None:
    url = pg_database(migrated=False)
    _migrate(url, revision)
    _run(url,
         "INSERT INTO agents (id, name, agent_type, system, llm_config, embedding_config, "
         "tool_rules, tool_names, metadata, in_context_message_ids, message_buffer_autoclear,"
         " enable_sleeptime, timezone, extra, created_at, updated_at) VALUES ('agent-1', "
         "'old', 'memgpt_agent', 'sys', '{}', '{}', '[]', '[\"send_message\"]', '{}', "
         "'[\"m1\"]', false, false, 'UTC', '{\"max_files_open\": 5}', 1.0, 2.0)",
         "INSERT INTO messages (id, agent_id, role, created_at, text, data) VALUES "
         "('m1', 'agent-1', 'user', 1.0, 'remember the zebras', "
         "'{\"id\": \"m1\", \"role\": \"user\", \"content\": "
         "[{\"type\": \"text\", \"text\": \"remember the zebras\"}], \"created_at\": 1.0}')",
         "INSERT INTO blocks (id, label, value, \"limit\", read_only, preserve_on_migration, "
         "metadata, extra, created_at, updated_at) VALUES "
         "('block-1', 'human', 'Ada', 100, false, false, '{}', '{}', 1.0, 1.0)",
         "INSERT INTO blocks_agents VALUES ('agent-1', 'block-1', 'human', 0)",
         *(["UPDATE agents SET in_context_after_seq = (SELECT max(seq) FROM messages)"]
           if revision >= "0006" else []))
    store = await open_store(url)
    try:
        agent = await store.get_agent("old")
        assert (agent.tool_names, agent.extra) == (["send_message"], {"max_files_open": 5})
        assert (await store.get_agent_block(agent.id, "human")).value == "Ada"
        assert agent.in_context_message_ids == ["m1"]
        hits = await store.search_messages(agent.id, "zebra")  # stemmed, as FTS5's porter
        assert [h.message.id for h in hits] == ["m1"]
        assert await store.count_passages(agent.id) == 0
    finally:
        await store.close()


async def test_every_migration_goes_down_and_up_again(pg_database: Factory) -> None:
    url = pg_database(migrated=False)
    store = await open_store(url)
    try:
        agent = await store.create_agent(AgentRecord(name="a"))
        run = await store.create_run(agent.id, status="running")
        first, second = user("one"), user("two")
        await store.append_step(agent.id, [first], in_context_ids=[first.id],
                                step=StepRecord(run.id, usage=Usage(3, 1)))
        await store.append_step(agent.id, [second], in_context_ids=APPEND,
                                step=StepRecord(run.id, index=1))
    finally:
        await store.close()
    _migrate(url, "0005", down=True)  # step records back in their table, the list whole
    assert _run(url, "SELECT step_index, input_tokens FROM steps ORDER BY step_index") == [
        (0, 3), (1, 0)]
    assert _run(url, "SELECT in_context_message_ids::text FROM agents") == [
        (f'["{first.id}", "{second.id}"]',)]
    _migrate(url, "base", down=True)
    assert _run(url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
                     "AND tablename <> 'alembic_version'") == [(0,)]
    for revision in known_revisions():  # one at a time: each upgrade runs alone
        _migrate(url, revision)
    assert _run(url, "SELECT version_num FROM alembic_version") == [(HEAD,)]


async def test_processes_opening_a_new_database_together_migrate_it_once(
        pg_database: Factory) -> None:
    url = pg_database(migrated=False)
    stores = await asyncio.gather(*(open_store(url) for _ in range(3)))
    try:
        agent = await stores[0].create_agent(AgentRecord(name="shared"))
        assert (await stores[2].get_agent("shared")).id == agent.id
    finally:
        for store in stores:
            await store.close()


async def test_processes_starting_together_register_the_same_tools_once(
        pg_database: Factory) -> None:
    url = pg_database()
    stores = await asyncio.gather(*(open_store(url) for _ in range(3)))
    names = [f"tool_{n:02d}" for n in range(40)]
    try:
        # Each process writes every tool, as a server does with the built-in ones at start.
        saved = await asyncio.gather(*(
            store.upsert_tool(ToolRecord(name=name, description=f"from {i}"))
            for name in names for i, store in enumerate(stores)))
        listed = await stores[0].list_tools()
        assert sorted(tool.name for tool in listed) == names
        ids = {tool.name: tool.id for tool in listed}
        assert all(tool.id == ids[tool.name] for tool in saved)  # each answered the stored id
    finally:
        for store in stores:
            await store.close()


async def test_runs_stay_running_while_another_process_has_the_database_open(
        pg_database: Factory) -> None:
    url = pg_database()
    store = await open_store(url)
    try:
        agent = await store.create_agent(AgentRecord(name="a"))
        stuck = await store.create_run(agent.id, status="running")
        other = await open_store(url)
        try:
            await other.get_agent(agent.id)  # its connections are open
            assert await store.fail_interrupted_runs() == []  # its runs may be live
        finally:
            await other.close()
        for _ in range(100):  # its server processes end just after it hung up
            failed = await store.fail_interrupted_runs()
            if failed:
                break
            await asyncio.sleep(0.05)
        assert failed == [stuck.id]
        assert (await store.get_run(stuck.id)).status == "failed"
    finally:
        await store.close()


async def test_steps_of_many_agents_at_once_land_whole_and_in_order(
        pg_database: Factory) -> None:
    store = await open_store(pg_database())
    try:
        agents = [(await store.create_agent(AgentRecord(name=f"a{i}"))).id for i in range(8)]

        async def talk(agent_id: str) -> None:
            for turn in range(10):
                await store.append_step(agent_id, [user(f"{agent_id} {turn}")])

        await asyncio.gather(*(talk(agent_id) for agent_id in agents))
        for agent_id in agents:
            texts = [m.text for m in await store.list_messages(agent_id)]
            assert texts == [f"{agent_id} {turn}" for turn in range(10)]
    finally:
        await store.close()
