"""Agent names repeat, as in Letta: lookups by name take the newest, ids always win, a search
by part of the name; databases from before keep their data and their foreign keys."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import column, create_engine, event, insert, inspect, table

from conftest import database_url
from stateloop import Agent
from stateloop.messages import user
from stateloop.store import AgentRecord, DuplicateError, open_store, schema
from stateloop.store import rows as store_rows
from stateloop.store.dialect import begin_sqlite, configure_sqlite_connection
from stateloop.store.migrate import upgrade
from stateloop.store.sql import SqlStore
from stateloop.testing import ScriptedModel

DRIVERS = ["sqlite", "sqlite+aiosqlite", "postgresql"]


@pytest.fixture(params=DRIVERS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await open_store(database_url(request.param, tmp_path, request))
    yield s
    await s.close()


async def test_names_repeat_and_a_name_finds_the_newest(store: SqlStore) -> None:
    first = await store.create_agent(AgentRecord(name="helper", created_at=1.0))
    second = await store.create_agent(AgentRecord(name="helper", created_at=2.0))
    assert (await store.get_agent("helper")).id == second.id
    assert (await store.get_agent(first.id)).id == first.id
    assert {a.id for a in await store.list_agents(name="helper")} == {first.id, second.id}
    await store.update_agent(first.id, name="other")
    await store.update_agent(first.id, name="helper")  # renaming onto a taken name is fine
    await store.delete_agent(second.id)
    assert (await store.get_agent("helper")).id == first.id


async def test_an_id_wins_over_a_name_that_looks_like_it(store: SqlStore) -> None:
    target = await store.create_agent(AgentRecord(name="target", created_at=1.0))
    await store.create_agent(AgentRecord(name=target.id, created_at=2.0))
    assert (await store.get_agent(target.id)).name == "target"


async def test_query_text_matches_part_of_the_name_in_any_case(store: SqlStore) -> None:
    for name in ("Support Bot", "support-desk", "Sales", "100%_sure"):
        await store.create_agent(AgentRecord(name=name))
    found = await store.list_agents(query_text="SUPPORT")
    assert sorted(a.name for a in found) == ["Support Bot", "support-desk"]
    assert [a.name for a in await store.list_agents(query_text="%_")] == ["100%_sure"]
    assert await store.list_agents(query_text="_") == [a for a in await store.list_agents()
                                                       if "_" in a.name]


async def test_the_library_refuses_a_taken_name(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lib.db'}"
    Agent(model=ScriptedModel([]), store=url, name="mine")
    with pytest.raises(DuplicateError, match="'mine' already exists"):
        Agent(model=ScriptedModel([]), store=url, name="mine")


@pytest.mark.parametrize("driver", ["sqlite", "sqlite+aiosqlite"])
async def test_a_database_from_before_keeps_its_data_and_foreign_keys(
        tmp_path: Path, driver: str) -> None:
    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    event.listen(engine, "connect", lambda conn, _rec: configure_sqlite_connection(conn))
    event.listen(engine, "begin", begin_sqlite)
    # At 0008 names are still unique: one agent with a message, as that revision stored them
    # (today's store writes tables of later revisions too).
    kept = AgentRecord(name="kept")
    with engine.connect() as conn:
        conn = conn.execution_options(stateloop_write=True)
        with conn.begin():
            upgrade(conn, str(path), "0008")
            then = {column["name"] for column in inspect(conn).get_columns("agents")}
            then_agents = table("agents", *(column(n, schema.agents.c[n].type) for n in then))
            conn.execute(insert(then_agents).values(
                {k: v for k, v in store_rows.agent_values(kept).items() if k in then}))
    engine.dispose()
    message = user("remember the zebra")
    columns = store_rows.MESSAGE_COLUMNS[:-1]  # step_at is revision 0021's
    with sqlite3.connect(path) as raw:  # the message as that revision stored it
        raw.execute(f"INSERT INTO messages ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' * len(columns))})",
                    store_rows.message_row(kept.id, message, None, None)[:-1])
    store = await open_store(f"{driver}:///{path}")
    try:
        assert [m.text for m in await store.get_messages([message.id])] == [
            "remember the zebra"]
        twin = await store.create_agent(AgentRecord(name="kept"))
        assert (await store.get_agent("kept")).id == twin.id
        await store.delete_agent(kept.id)  # enforcement is on again: the messages go too
    finally:
        await store.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
