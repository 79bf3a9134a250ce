"""Opening databases: migrations from empty and from the previous revision, and bad URLs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from stateloop.store import (
    AgentRecord,
    BlockRecord,
    DatabaseOpenError,
    SchemaTooNewError,
    open_store,
)
from stateloop.store.dialect import begin_sqlite, configure_sqlite_connection
from stateloop.store.migrate import HEAD, known_revisions, upgrade
from stateloop.store.schema import metadata


def _sync_engine(path: Path):  # type: ignore[no-untyped-def]
    from sqlalchemy import event

    engine = create_engine(f"sqlite:///{path}")
    event.listen(engine, "connect", lambda conn, _rec: configure_sqlite_connection(conn))
    event.listen(engine, "begin", begin_sqlite)
    return engine


def _tables(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE 'messages_fts_%'")]
        return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}


def test_head_constant_matches_the_shipped_revisions() -> None:
    assert known_revisions()[-1] == HEAD
    assert len(known_revisions()) >= 2


async def test_empty_database_upgrades_to_head_and_matches_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    store = await open_store(f"sqlite:///{path}")
    await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == HEAD
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    def include(obj: object, name: str | None, type_: str, *_: object) -> bool:
        return not (type_ == "table" and name is not None
                    and (name.startswith("messages_fts") or name == "recall_index"))

    with _sync_engine(path).connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_object": include})
        assert compare_metadata(context, metadata) == []


@pytest.mark.parametrize("revision", ["0001", "0008"])  # the oldest and the previous head
async def test_database_at_previous_revision_with_data_upgrades_losing_nothing(
        tmp_path: Path, revision: str) -> None:
    path = tmp_path / "old.db"
    engine = _sync_engine(path)
    with engine.connect() as conn:
        conn = conn.execution_options(stateloop_write=True)
        with conn.begin():
            upgrade(conn, str(path), revision)
    engine.dispose()
    with sqlite3.connect(path) as raw:
        raw.execute(
            "INSERT INTO agents (id, name, agent_type, system, llm_config, embedding_config, "
            "tool_rules, tool_names, metadata, in_context_message_ids, message_buffer_autoclear,"
            " enable_sleeptime, timezone, extra, created_at, updated_at) VALUES ('agent-1', "
            "'old', 'memgpt_agent', 'sys', '{}', '{}', '[]', '[\"send_message\"]', '{}', "
            "'[\"m1\"]', 0, 0, 'UTC', '{\"max_files_open\": 5}', 1.0, 2.0)")
        raw.execute("INSERT INTO messages (id, agent_id, role, created_at, text, data) VALUES "
                    "('m1', 'agent-1', 'user', 1.0, 'remember the zebra', "
                    "'{\"id\": \"m1\", \"role\": \"user\", \"content\": "
                    "[{\"type\": \"text\", \"text\": \"remember the zebra\"}], "
                    "\"created_at\": 1.0}')")
        raw.execute("INSERT INTO blocks (id, label, value, \"limit\", read_only, "
                    "preserve_on_migration, metadata, extra, created_at, updated_at) VALUES "
                    "('block-1', 'human', 'Ada', 100, 0, 0, '{}', '{}', 1.0, 1.0)")
        raw.execute("INSERT INTO blocks_agents VALUES ('agent-1', 'block-1', 'human', 0)")
        if revision >= "0006":  # the stored list is the whole context: nothing follows it
            raw.execute("UPDATE agents SET in_context_after_seq = "
                        "(SELECT max(seq) FROM messages)")
    before = _tables(path)

    store = await open_store(f"sqlite:///{path}")
    try:
        after = _tables(path)
        assert "step_logs" not in after  # 0006 made it, 0008 dropped it, empty either way
        kept = {name: count for name, count in before.items() if name != "step_logs"}
        assert {name: after[name] for name in kept} == kept  # new tables may appear
        agent = await store.get_agent("old")
        assert agent.agent_type == "memgpt_agent"
        assert agent.tool_names == ["send_message"]
        assert agent.extra == {"max_files_open": 5}
        assert agent.last_stop_reason is None  # the column 0002 added
        assert agent.pending_approval is None  # the column 0003 added
        assert (await store.get_agent_block(agent.id, "human")).value == "Ada"
        assert [m.text for m in await store.get_messages(["m1"])] == ["remember the zebra"]
        assert agent.in_context_message_ids == ["m1"]
        hits = await store.search_messages(agent.id, "zebra")
        assert [h.message.id for h in hits] == ["m1"]
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == HEAD


async def test_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    store = await open_store(f"sqlite:///{path}")
    await store.create_agent(AgentRecord(name="keep"))
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0999'")
    before = path.read_bytes()
    with pytest.raises(SchemaTooNewError, match=r"'0999'.*newer than this stateloop"):
        await open_store(f"sqlite:///{path}")
    assert _tables(path)["agents"] == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == "0999"
    assert len(path.read_bytes()) == len(before)


async def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, I am not SQLite " * 100)
    with pytest.raises(DatabaseOpenError, match=r"notes\.txt"):
        await open_store(f"sqlite:///{path}")
    assert path.read_text().startswith("hello, I am not SQLite")


async def test_an_unreachable_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DatabaseOpenError, match="cannot open database"):
        await open_store(f"sqlite:///{blocker}/sub/db.sqlite")


@pytest.mark.parametrize("url", ["mysql://u@h/db", "postgresql://u@h/db", "sqlite://",
                                 "sqlite+pysqlcipher:///x.db"])
async def test_unsupported_urls_are_clear_errors(url: str) -> None:
    with pytest.raises(DatabaseOpenError, match="cannot open database"):
        await open_store(url)


async def test_a_foreign_sqlite_database_is_not_adopted(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    with pytest.raises(DatabaseOpenError, match="not a stateloop database"):
        await open_store(str(path))
    assert set(_tables(path)) == {"invoices"}


async def test_env_var_and_default_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATELOOP_DATABASE_URL", f"sqlite:///{tmp_path / 'env.db'}")
    store = await open_store()
    await store.close()
    assert (tmp_path / "env.db").exists()

    monkeypatch.delenv("STATELOOP_DATABASE_URL")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store = await open_store()
    await store.create_block(BlockRecord(label="x"))
    await store.close()
    assert (tmp_path / "home" / ".stateloop" / "stateloop.db").exists()


async def test_revision_0006_downgrades_keeping_the_context_and_the_step_records(
        tmp_path: Path) -> None:
    from alembic import command

    from stateloop.messages import Usage, user
    from stateloop.store import StepRecord
    from stateloop.store.migrate import _alembic_config
    from stateloop.store.records import APPEND

    path = tmp_path / "down.db"
    store = await open_store(f"sqlite:///{path}")
    agent = await store.create_agent(AgentRecord(name="a"))
    run = await store.create_run(agent.id, status="running")
    first, second = user("one"), user("two")
    await store.append_step(agent.id, [first], in_context_ids=[first.id])
    await store.append_step(agent.id, [second], in_context_ids=APPEND,
                            step=StepRecord(run.id, model="m", usage=Usage(7, 2)))
    await store.close()

    engine = _sync_engine(path)
    with engine.connect() as conn:
        conn = conn.execution_options(stateloop_write=True)
        with conn.begin():
            command.downgrade(_alembic_config(conn), "0005")
    engine.dispose()
    with sqlite3.connect(path) as raw:
        listed = raw.execute("SELECT in_context_message_ids FROM agents").fetchone()[0]
        steps = raw.execute("SELECT model, input_tokens, output_tokens FROM steps").fetchall()
        data = [json.loads(row[0]) for row in raw.execute("SELECT data FROM messages")]
    assert listed == f'["{first.id}","{second.id}"]'
    assert steps == [("m", 7, 2)]
    assert data == [first.to_dict(), second.to_dict()]  # whole again, as 0006 reads them

    store = await open_store(f"sqlite:///{path}")  # and up again
    try:
        assert (await store.get_agent(agent.id)).in_context_message_ids == [first.id,
                                                                           second.id]
        assert [s.model for s in await store.list_steps(run.id)] == ["m"]
    finally:
        await store.close()


async def test_revision_0006_step_records_become_arrays_with_every_field_kept(
        tmp_path: Path) -> None:
    path = tmp_path / "steps.db"
    engine = _sync_engine(path)
    with engine.connect() as conn:
        conn = conn.execution_options(stateloop_write=True)
        with conn.begin():
            upgrade(conn, str(path), "0006")
    engine.dispose()
    record = {"id": "step-1", "index": 2, "model": "gpt-4o", "provider": "openai",
              "input_tokens": 11, "output_tokens": 3, "cached_input_tokens": 5,
              "reasoning_tokens": 1, "cache_write_tokens": 2, "latency_ms": 12.5,
              "finish_reason": "tool_calls", "error": None, "metadata": {"k": [1, "v"]},
              "created_at": 1796135406.3883808}
    with sqlite3.connect(path) as raw:
        raw.execute(
            "INSERT INTO agents (id, name, agent_type, system, llm_config, embedding_config, "
            "tool_rules, tool_names, metadata, in_context_message_ids, message_buffer_autoclear,"
            " enable_sleeptime, timezone, extra, created_at, updated_at) VALUES ('agent-1', "
            "'old', 'letta_v1_agent', 'sys', '{}', '{}', '[]', '[]', '{}', '[]', 0, 0, 'UTC', "
            "'{}', 1.0, 2.0)")
        raw.execute("INSERT INTO runs (id, agent_id, status, input_tokens, output_tokens, "
                    "cached_input_tokens, reasoning_tokens, cache_write_tokens, step_count, "
                    "metadata, created_at) VALUES ('run-1', 'agent-1', 'completed', 0, 0, 0, "
                    "0, 0, 1, '{}', 1.0)")
        raw.execute("INSERT INTO messages (id, agent_id, run_id, step_id, role, created_at, "
                    "text, data, step) VALUES ('m1', 'agent-1', 'run-1', 'step-1', 'user', 1.0,"
                    " 'hi', '{\"id\": \"m1\", \"role\": \"user\", \"content\": [], "
                    "\"created_at\": 1.0}', ?)", (json.dumps(record),))

    store = await open_store(f"sqlite:///{path}")
    try:
        [step] = await store.list_steps("run-1")
    finally:
        await store.close()
    assert (step.id, step.run_id, step.agent_id) == ("step-1", "run-1", "agent-1")
    usage = step.usage.to_dict()
    kept = {name: getattr(step, name) for name in record if name != "id" and name not in usage}
    assert {**kept, **usage} == {name: value for name, value in record.items() if name != "id"}
    with sqlite3.connect(path) as raw:
        stored = json.loads(raw.execute("SELECT step FROM messages").fetchone()[0])
    assert stored == [value for name, value in record.items() if name != "id"]  # in order
