"""Lists page in SQL: a page of a table far larger than the page reads about the page's
rows, whichever list, order or cursor; the oldest run is reached however many runs there
are; counts are counted in SQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event, insert
from sqlalchemy.engine import Engine

from stateloop.store import (
    AgentRecord,
    BlockRecord,
    RunRecord,
    ToolRecord,
    open_store,
    schema,
)
from stateloop.store import rows as store_rows
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, settings_for

pytest_plugins = ["test_server_support"]

AGENTS = 300
TOOLS = 200
RUNS = 10_050  # past the 10,000 runs a list once read at most
T0 = 1_700_000_000.0


async def _fill(url: str) -> tuple[list[str], list[str]]:
    """Agents (two blocks and tags each) and runs, oldest first, with distinct times."""
    store = await open_store(url)
    try:
        agents = []
        for n in range(AGENTS):
            record = AgentRecord(name=f"agent-{n}", tags=["all", f"mod{n % 3}"],
                                 created_at=T0 + n)
            await store.create_agent(record, [BlockRecord(label="human", created_at=T0 + n),
                                              BlockRecord(label="persona", created_at=T0 + n)])
            agents.append(record.id)
        runs = [RunRecord(agent_id=agents[n % AGENTS], status="completed", created_at=T0 + n)
                for n in range(RUNS)]
        for n in range(TOOLS):
            await store.upsert_tool(ToolRecord(name=f"tool_{n:03d}", tool_type="custom",
                                               json_schema={"name": f"tool_{n:03d}"}))
        values = [store_rows.run_values(run) for run in runs]
        await store._runner.write(lambda conn: conn.execute(insert(schema.runs), values))
        return agents, [run.id for run in runs]
    finally:
        await store.close()


@pytest.fixture(scope="module")
def filled(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Server, list[str], list[str]]]:
    db: Path = tmp_path_factory.mktemp("pages") / "stateloop.db"
    agents, runs = asyncio.run(_fill(f"sqlite:///{db}"))
    with Server(settings_for(fake, db)) as running:
        yield running, agents, runs


class RowCount:
    """Rows the database hands back to any SQLAlchemy engine in this process, and the
    statements run, while the block runs."""

    def __init__(self) -> None:
        self.rows = 0
        self.statements = 0

    def _count(self, cursor: Any, row: tuple[Any, ...]) -> tuple[Any, ...]:
        self.rows += 1
        return row

    def _before(self, conn: Any, cursor: Any, *args: Any) -> None:
        self.statements += 1
        cursor.row_factory = self._count

    def __enter__(self) -> RowCount:
        event.listen(Engine, "before_cursor_execute", self._before)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(Engine, "before_cursor_execute", self._before)


def _read(server: Server, path: str) -> tuple[Any, RowCount]:
    with RowCount() as counted:
        response = httpx.get(server.url + path, timeout=60)
    assert response.status_code == 200, response.text
    return response.json(), counted


@pytest.mark.parametrize("path", [
    "/v1/agents?limit=10", "/v1/agents?limit=10&order=asc",
    "/v1/agents?limit=10&tags=all", "/v1/agents?limit=10&query_text=agent-",
    "/v1/blocks?limit=10", "/v1/blocks?limit=10&order=desc&label=human",
    "/v1/runs?limit=10", "/v1/runs?limit=10&order=asc&statuses=completed",
    "/v1/tools?limit=10", "/v1/tools?limit=10&order=desc",
])
def test_a_page_reads_the_rows_of_the_page(filled: tuple[Server, list[str], list[str]],
                                           path: str) -> None:
    server, agents, runs = filled
    first, _ = _read(server, path)
    assert len(first) == 10
    # The middle of the table, after a cursor: still the rows of one page.
    middle = (agents if path.startswith("/v1/agents") else
              runs if path.startswith("/v1/runs") else [])
    cursor = f"&after={first[-1]['id']}" if not middle else f"&after={middle[len(middle) // 2]}"
    for query in (path, path + cursor):
        page, counted = _read(server, query)
        assert len(page) == 10, query
        # An agent brings its two blocks and its tags: 10 agents are some 50 rows. A list
        # read in Python would read 300 agents, 600 blocks or 10,050 runs.
        assert counted.rows <= 60, (query, counted.rows)
        assert counted.statements <= 30, (query, counted.statements)


@pytest.mark.parametrize("path, expected", [
    ("/v1/agents/count", AGENTS), ("/v1/agents/count?tags=mod1", AGENTS // 3),
    ("/v1/blocks/count", 2 * AGENTS), ("/v1/blocks/count?label=human", AGENTS),
    ("/v1/tools/count?search=TOOL_", TOOLS), ("/v1/tools/count?tool_types=custom", TOOLS),
])
def test_counts_are_counted_in_sql(filled: tuple[Server, list[str], list[str]], path: str,
                                   expected: int) -> None:
    count, counted = _read(filled[0], path)
    assert count == expected
    assert counted.rows <= 2, (path, counted.rows)


def test_paging_walks_every_agent_in_both_orders(
        filled: tuple[Server, list[str], list[str]]) -> None:
    server, agents, _ = filled
    for order, expected in (("asc", agents), ("desc", agents[::-1])):
        walked: list[str] = []
        after = ""
        while True:
            page, counted = _read(server, f"/v1/agents?limit=64&order={order}{after}")
            assert counted.rows <= 64 * 6
            walked += [agent["id"] for agent in page]
            if len(page) < 64:
                break
            after = f"&after={page[-1]['id']}"
        assert walked == expected, order
    # Between two cursors, relative to the order, as Letta defines them.
    between, _ = _read(server, f"/v1/agents?order=desc&after={agents[20]}&before={agents[10]}")
    assert [agent["id"] for agent in between] == agents[19:10:-1]
    between, _ = _read(server, f"/v1/agents?order=asc&after={agents[10]}&before={agents[20]}")
    assert [agent["id"] for agent in between] == agents[11:20]


def test_the_oldest_run_is_reached_past_any_window(
        filled: tuple[Server, list[str], list[str]]) -> None:
    server, _, runs = filled
    oldest, _ = _read(server, "/v1/runs?order=asc&limit=2")
    assert [run["id"] for run in oldest] == runs[:2]
    last, counted = _read(server, f"/v1/runs?order=desc&after={runs[1]}")
    assert [run["id"] for run in last] == runs[:1]
    assert counted.rows <= 5
    newest, _ = _read(server, f"/v1/runs?limit=3&before={runs[0]}&order=asc")
    assert newest == []
