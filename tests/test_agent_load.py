"""Loading a stored agent reads it in one transaction of a fixed number of statements, on SQLite
and on PostgreSQL, however long its history: a send to an agent that is not live in the process
pays one round of reads (one query per table), not a transaction per table."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from letta_client import Letta
from sqlalchemy import event

from conftest import DIALECTS, database_url
from stateloop import Agent, Block, tool
from stateloop.messages import assistant, user
from stateloop.store import open_store
from stateloop.store.records import APPEND
from stateloop.store.sql import SqlStore
from stateloop.testing import ScriptedModel, reply
from test_server_support import Script, Server, fake, script, settings_for  # noqa: F401

# What one load reads: the agent, its tags, blocks, tools, in-context messages, folders, its
# counts, runs left running and the group it manages; one statement each.
LOAD_STATEMENTS = 9


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@dataclass
class Trace:
    statements: list[str] = field(default_factory=list)
    transactions: int = 0


@contextmanager
def traced(store: SqlStore) -> Iterator[Trace]:
    """The statements and transactions the store's engine runs inside the block."""
    engine = store._runner.engine  # type: ignore[attr-defined]
    trace = Trace()

    def on_statement(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement not in ("BEGIN", "BEGIN IMMEDIATE", "COMMIT"):  # counted as transactions
            trace.statements.append(" ".join(statement.split())[:100])

    def on_begin(conn: Any) -> None:
        trace.transactions += 1

    event.listen(engine, "before_cursor_execute", on_statement)
    event.listen(engine, "begin", on_begin)
    try:
        yield trace
    finally:
        event.remove(engine, "before_cursor_execute", on_statement)
        event.remove(engine, "begin", on_begin)


@pytest.fixture(params=DIALECTS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return database_url(request.param, tmp_path, request)


async def test_loading_an_agent_is_one_transaction_whatever_its_history(db: str) -> None:
    agent = Agent(model=ScriptedModel([reply("one"), reply("two")]), tools=[add],
                  system="sys", blocks=[Block("human", "Ada"), Block("persona", "helpful")],
                  store=db, name="ada")
    await agent.run("first")
    await agent.run("second")
    store = await open_store(db)
    try:
        with traced(store) as short:
            loaded = await Agent.aload(agent.id, store=store, model=ScriptedModel([]), tools=[add])
        assert [m.text for m in loaded.messages[1:]] == ["first", "one", "second", "two"]
        assert [b.value for b in loaded.blocks] == ["Ada", "helpful"]
        assert short.transactions == 1, short.statements
        assert len(short.statements) <= LOAD_STATEMENTS, short.statements

        for start in range(0, 400, 100):  # a long history, all of it in context
            await store.append_step(agent.id, [m for i in range(start, start + 100, 2)
                                               for m in (user(f"q{i}"), assistant(f"a{i}"))],
                                     in_context_ids=APPEND)
        with traced(store) as long:
            loaded = await Agent.aload(agent.id, store=store, model=ScriptedModel([]),
                                       tools=[add])
        assert len(loaded.messages) == 5 + 400
        assert loaded.storage.thread.recall_count == await store.count_messages(agent.id)
        assert long.transactions == 1 and long.statements == short.statements
    finally:
        await store.close()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_send_to_an_agent_not_live_reads_it_in_one_transaction(
        dialect: str, fake: Any, script: Script, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    settings = settings_for(fake, tmp_path / "stateloop.db",
                            database_url=database_url(dialect, tmp_path, request))
    with Server(settings) as server:
        runtime = server.server.config.app.state.runtime
        client = Letta(base_url=server.url, api_key="x")
        agent = client.agents.create(model="openai/gpt-4o-mini", include_base_tools=True,
                                     memory_blocks=[{"label": "human", "value": "Ada"}])
        say = [{"role": "user", "content": "hello"}]
        script.set(reply("hi"), reply("hi again"), reply("and again"))
        client.agents.messages.create(agent.id, messages=say)
        with traced(runtime.store) as warm:
            client.agents.messages.create(agent.id, messages=say)
        runtime.forget(agent.id)
        with traced(runtime.store) as cold:
            done = client.agents.messages.create(agent.id, messages=say)
        assert done.messages[-1].content == "and again"
        # The load, and the route's check that the agent exists.
        assert cold.transactions - warm.transactions <= 2, (cold.statements, warm.statements)
        assert len(cold.statements) - len(warm.statements) <= LOAD_STATEMENTS + 2, \
            cold.statements
