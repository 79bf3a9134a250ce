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

import httpx
import pytest
from letta_client import Letta
from sqlalchemy import event, func, select

from conftest import DIALECTS, database_url
from stateloop import Agent, Block, tool
from stateloop.messages import assistant, user
from stateloop.store import open_store, schema
from stateloop.store.records import APPEND
from stateloop.store.sql import SqlStore
from stateloop.testing import ScriptedModel, reply
from test_server_support import Script, Server, fake, script, settings_for  # noqa: F401

# What one load reads: the agent, its tags, blocks, tools, in-context messages, folders, its
# counts (its messages' kept with it; its passages'), runs left running and the group it
# manages; one statement each.
LOAD_STATEMENTS = 9
FLEET_LOOKS = ("pg_stat_activity", "FROM scheduled_messages", "FROM batch_requests")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@dataclass
class Trace:
    statements: list[str] = field(default_factory=list)
    reads: int = 0  # transactions that begin with a SELECT


@contextmanager
def traced(store: SqlStore) -> Iterator[Trace]:
    """The statements and read transactions the store's engine runs inside the block. (Writes
    are left uncounted: the write runner may join concurrent writes in one transaction, and
    the step's own statements go to the driver directly.)"""
    engine = store._runner.engine  # type: ignore[attr-defined]
    trace = Trace()
    begun: set[int] = set()  # connections whose transaction has run no statement yet

    def on_statement(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        first = id(conn) in begun
        begun.discard(id(conn))
        # A fleet's looks each second, beside any request: for dead processes, due scheduled
        # messages and batch requests to run.
        if any(table in statement for table in FLEET_LOOKS):
            return
        if statement not in ("BEGIN", "BEGIN IMMEDIATE", "COMMIT"):
            trace.statements.append(" ".join(statement.split())[:1000])
            trace.reads += first and statement.lstrip().upper().startswith("SELECT")

    def on_begin(conn: Any) -> None:
        begun.add(id(conn))

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
        assert short.reads == 1, short.statements
        assert len(short.statements) <= LOAD_STATEMENTS, short.statements

        for start in range(0, 400, 100):  # a long history, all of it in context
            await store.append_step(agent.id, [m for i in range(start, start + 100, 2)
                                               for m in (user(f"q{i}"), assistant(f"a{i}"))],
                                     in_context_ids=APPEND)
        with traced(store) as long:
            loaded = await Agent.aload(agent.id, store=store, model=ScriptedModel([]),
                                       tools=[add])
        assert len(loaded.messages) == 5 + 400
        # The agent's count, kept as messages are stored: the load reads it, counting none.
        counted = await store._runner.read(lambda conn: conn.execute(
            select(func.count()).where(schema.messages.c.agent_id == agent.id)).scalar())
        assert loaded.storage.thread.recall_count == counted == 405
        assert await store.count_messages(agent.id) == counted
        assert long.reads == 1
        assert [s[:100] for s in long.statements] == [s[:100] for s in short.statements]
        assert not any("count(" in s and "FROM messages" in s for s in long.statements), \
            long.statements
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
                                     name="ada",
                                     memory_blocks=[{"label": "human", "value": "Ada"}])
        say = [{"role": "user", "content": "hello"}]
        script.set(reply("hi"), reply("hi again"), reply("and again"))
        client.agents.messages.create(agent.id, messages=say)
        with traced(runtime.store) as warm:
            client.agents.messages.create(agent.id, messages=say)
        # A live agent's send reads nothing on SQLite; on PostgreSQL only its turn in the
        # fleet, which also brings its blocks' version (they are not read unless it moved),
        # and leaving the turn: one statement each.
        assert len(warm.statements) == (2 if dialect == "postgresql" else 0), warm.statements
        runtime.forget(agent.id)
        with traced(runtime.store) as cold:
            done = client.agents.messages.create(agent.id, messages=say)
        assert done.messages[-1].content == "and again"
        # The load, and nothing else: the load answers "not found" itself.
        assert cold.reads - warm.reads == 1, (cold.statements, warm.statements)
        assert len(cold.statements) - len(warm.statements) <= LOAD_STATEMENTS, \
            cold.statements

        # An id that names no agent (or is an agent's name) is a 404 naming it, read once.
        for missing in ("agent-00000000-0000-4000-8000-000000000000", agent.name):
            with traced(runtime.store) as unknown:
                answer = httpx.post(f"{server.url}/v1/agents/{missing}/messages",
                                    json={"messages": say})
            assert answer.status_code == 404, (missing, answer.text)
            assert answer.json()["detail"] == f"agent with id {missing!r} not found"
            reads = [s for s in unknown.statements if "fleet" not in s]  # a fleet's ticket
            assert len(reads) == 1 and reads[0].startswith("SELECT agents."), reads
