"""Lists page in SQL: a page of a table far larger than the page reads about the page's
rows, whichever list, order or cursor; the oldest run is reached however many runs there
are; counts are counted in SQL."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event, insert
from sqlalchemy.engine import Engine

from patience import ANSWERS
from stateloop.messages import assistant
from stateloop.store import (
    AgentRecord,
    ArchiveRecord,
    BlockRecord,
    IdentityRecord,
    Page,
    RunRecord,
    StepRecord,
    ToolRecord,
    open_store,
    schema,
)
from stateloop.store import rows as store_rows
from stateloop.store.fastpath import InsertRows
from stateloop.store.folders import FileRecord
from stateloop.store.groups import GroupRecord
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, client, fake, script, server, settings_for  # noqa: F401 (fixtures)

AGENTS = 300
TOOLS = 200
OTHERS = 100  # archives, folders, groups
RUNS = 10_050  # past the 10,000 runs a list once read at most
STEPS = 6_000
GROUP_MESSAGES = 2_000
FILES = 300  # in one folder
T0 = 1_700_000_000.0


async def _fill(url: str) -> tuple[list[str], list[str], str, str]:
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
        shared = await store.create_block(BlockRecord(label="shared"))
        for n, agent_id in enumerate(agents):  # each agent an identity of its own
            identity = await store.create_identity(IdentityRecord(
                identifier_key=f"user-{n}", name="U", created_at=T0 + n))
            await store.set_agent_identities(agent_id, [identity.id])
            await store.attach_block(agent_id, shared.id)
        for n in range(OTHERS):
            await store.create_archive(ArchiveRecord(name=f"archive-{n}", created_at=T0 + n))
            await store.create_group(GroupRecord(manager_type="round_robin",
                                                 agent_ids=[agents[n], agents[n + 1]],
                                                 created_at=T0 + n))
        for n in range(TOOLS):
            await store.upsert_tool(ToolRecord(name=f"tool_{n:03d}", tool_type="custom",
                                               json_schema={"name": f"tool_{n:03d}"}))
        values = [store_rows.run_values(run) for run in runs]
        await store._runner.write(lambda conn: conn.execute(insert(schema.runs), values))
        # Steps in both places they are kept: on the message row each wrote, and alone.
        steps = [StepRecord(runs[n].id, agents[n % 100], index=0, model="openai/gpt-4o-mini",
                            created_at=T0 + n) for n in range(STEPS)]
        carried = [store_rows.message_row(step.agent_id, assistant(f"step {n}"), step.run_id,
                                          step.id, step)
                   for n, step in enumerate(steps) if n % 10]
        alone = [store_rows.step_row(step) for n, step in enumerate(steps) if not n % 10]
        await store._runner.write(lambda conn: (
            InsertRows(schema.messages, store_rows.MESSAGE_COLUMNS).execute(
                conn, carried, keys=False),
            InsertRows(schema.steps, store_rows.STEP_COLUMNS).execute(conn, alone, keys=False)))
        for agent_id in agents[:100]:  # their history is in recall, out of context
            await store.set_in_context(agent_id, [])
        # A group's long conversation, and a tag of its own for each of 100 agents.
        group = (await store.list_groups(page=Page(limit=1)))[0]
        said = [{"id": f"group-message-{n:05d}", "group_id": group.id, "role": "user",
                 "text": f"said {n}", "created_at": T0 + n} for n in range(GROUP_MESSAGES)]
        tagged = [{"agent_id": agent_id, "tag": f"user-{n:03d}"}
                  for n, agent_id in enumerate(agents[:100])]
        await store._runner.write(lambda conn: (
            conn.execute(insert(schema.group_messages), said),
            conn.execute(insert(schema.agent_tags), tagged)))
        return agents, [run.id for run in runs], shared.id, group.id
    finally:
        await store.close()


async def _add_files(url: str, folder_id: str) -> None:
    """Files in a folder, written as an upload leaves them."""
    store = await open_store(url)
    try:
        files = [dataclasses.asdict(FileRecord(folder_id, f"f{n}.txt", f"f{n}.txt", "text/plain",
                                               1, content="x", created_at=T0 + n))
                 for n in range(FILES)]
        chunks = [{"id": f"file-passage-{n:04d}", "file_id": files[n % FILES]["id"],
                   "folder_id": folder_id, "text": f"chunk {n}", "embedding": b"\0" * 16,
                   "embedding_model": "text-embedding-3-small", "embedding_dim": 4,
                   "created_at": T0 + n} for n in range(2 * FILES)]
        await store._runner.write(lambda conn: (conn.execute(insert(schema.files), files),
                                                conn.execute(insert(schema.file_passages),
                                                             chunks)))
    finally:
        await store.close()


@dataclass
class Filled:
    """A server over the filled database, and the ids in it (oldest first)."""

    server: Server
    agents: list[str]
    runs: list[str]
    shared: str  # a block every agent has
    group: str  # with a long conversation
    folder: str  # with many files


@contextmanager
def served(fake: FakeOpenAI, db: Path) -> Iterator[tuple[Server, list[str], list[str], str,
                                                           str, str]]:
    """The filled database served: the server, the agents, the runs, the shared block, the
    group, and the folder with many files."""
    agents, runs, shared, group = asyncio.run(_fill(f"sqlite:///{db}"))
    with Server(settings_for(fake, db)) as running:
        for n in range(OTHERS):  # as a user makes them: the server picks the embedder
            made = httpx.post(f"{running.url}/v1/folders", json={"name": f"folder-{n}"},
                              timeout=ANSWERS)
            assert made.status_code == 200, made.text
        folder = httpx.get(f"{running.url}/v1/folders?limit=1&order=asc",
                           timeout=ANSWERS).json()[0]["id"]
        asyncio.run(_add_files(f"sqlite:///{db}", folder))
        yield running, agents, runs, shared, group, folder


@pytest.fixture(scope="module")
def filled(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Filled]:
    with served(fake, tmp_path_factory.mktemp("pages") / "stateloop.db") as state:
        yield Filled(*state)


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


def _read(server: Server, path: str, headers: dict[str, str] | None = None
          ) -> tuple[Any, RowCount]:
    with RowCount() as counted:
        response = httpx.get(server.url + path, headers=headers, timeout=ANSWERS)
    assert response.status_code == 200, response.text
    return response.json(), counted


@pytest.mark.parametrize("path", [
    "/v1/agents?limit=10", "/v1/agents?limit=10&order=asc",
    "/v1/agents?limit=10&tags=all", "/v1/agents?limit=10&query_text=agent-",
    "/v1/blocks?limit=10", "/v1/blocks?limit=10&order=desc&label=human",
    "/v1/runs?limit=10", "/v1/runs?limit=10&order=asc&statuses=completed",
    "/v1/tools?limit=10", "/v1/tools?limit=10&order=desc",
    "/v1/identities?limit=10&order=asc",
    "/v1/blocks/{shared}/agents?limit=10", "/v1/archives?limit=10",
    "/v1/folders?limit=10&order=desc", "/v1/groups?limit=10", "/v1/identities?limit=10",
    "/v1/steps?limit=10", "/v1/steps?limit=10&order=asc",
    "/v1/steps?limit=10&agent_id={first}", "/v1/steps?limit=10&model=gpt-4o-mini",
    "/v1/groups/{group}/messages?limit=10", "/v1/groups/{group}/messages?limit=10&order=asc",
    "/v1/folders/{folder}/files?limit=10", "/v1/folders/{folder}/files?limit=10&order=desc",
    "/v1/folders/{folder}/passages?limit=10&order=desc",
    "/v1/tags?limit=10", "/v1/tags?limit=10&order=desc", "/v1/tags?limit=10&name=USER-",
])
def test_a_page_reads_the_rows_of_the_page(filled: Filled, path: str) -> None:
    server, agents, runs = filled.server, filled.agents, filled.runs
    path = path.format(shared=filled.shared, first=agents[0], group=filled.group,
                       folder=filled.folder)
    first, _ = _read(server, path)
    assert len(first) == 10
    # The middle of the table, after a cursor: still the rows of one page.
    middle = (agents if path.startswith("/v1/agents") else
              runs if path.startswith("/v1/runs") else [])
    last = first[-1] if path.startswith("/v1/tags") else first[-1]["id"]
    cursor = f"&after={last}" if not middle else f"&after={middle[len(middle) // 2]}"
    for query in (path, path + cursor):
        page, counted = _read(server, query)
        assert len(page) == 10, query
        # An agent brings its three blocks, two tags and an identity (and its agent): 10
        # agents are some 80 rows, read in a few statements whatever the page size. A
        # list read in Python would read 300 agents, 600 blocks or 10,050 runs.
        assert counted.rows <= 100, (query, counted.rows)
        assert counted.statements <= 16, (query, counted.statements)
    # A page four times the size reads in as many statements: none is made per row.
    larger, more = _read(server, path.replace("limit=10", "limit=40"))
    assert len(larger) == 40
    assert more.statements <= counted.statements, (path, more.statements, counted.statements)


@pytest.mark.parametrize("path, expected", [
    ("/v1/agents/count", AGENTS), ("/v1/agents/count?tags=mod1", AGENTS // 3),
    ("/v1/blocks/count", 2 * AGENTS + 1), ("/v1/blocks/count?label=human", AGENTS),
    ("/v1/tools/count?search=TOOL_", TOOLS), ("/v1/tools/count?tool_types=custom", TOOLS),
])
def test_counts_are_counted_in_sql(filled: Filled, path: str, expected: int) -> None:
    count, counted = _read(filled.server, path)
    assert count == expected
    assert counted.rows <= 2, (path, counted.rows)


def test_models_and_active_runs_read_no_list(filled: Filled) -> None:
    models, counted = _read(filled.server, "/v1/models")
    assert len(models) >= 1 and counted.rows <= 3, counted.rows
    active, counted = _read(filled.server, "/v1/runs/active")
    assert active == [] and counted.rows == 0, counted.rows  # 10,050 runs, all finished


def test_paging_walks_every_agent_in_both_orders(filled: Filled) -> None:
    server, agents = filled.server, filled.agents
    for order, expected in (("asc", agents), ("desc", agents[::-1])):
        walked: list[str] = []
        after = ""
        while True:
            page, counted = _read(server, f"/v1/agents?limit=64&order={order}{after}")
            assert counted.rows <= 64 * 10
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


def test_the_oldest_run_is_reached_past_any_window(filled: Filled) -> None:
    server, runs = filled.server, filled.runs
    oldest, _ = _read(server, "/v1/runs?order=asc&limit=2")
    assert [run["id"] for run in oldest] == runs[:2]
    last, counted = _read(server, f"/v1/runs?order=desc&after={runs[1]}")
    assert [run["id"] for run in last] == runs[:1]
    assert counted.rows <= 5
    newest, _ = _read(server, f"/v1/runs?limit=3&before={runs[0]}&order=asc")
    assert newest == []


@pytest.mark.parametrize("headers", [{"x-stainless-package-version": "1.0.0"}, None],
                         ids=["letta-client 1.x, no relationships", "every relationship"])
def test_a_page_of_agents_shows_each_as_retrieving_it_does(filled: Filled,
                                                           headers: dict[str, str] | None
                                                           ) -> None:
    """The page is written from each agent's model, validated once; it is what the route of
    one agent answers through its response model, field for field."""
    page, _ = _read(filled.server, "/v1/agents?limit=5&order=asc", headers)
    assert [agent["id"] for agent in page] == filled.agents[:5]
    for agent in page:
        one, _ = _read(filled.server, f"/v1/agents/{agent['id']}", headers)
        assert agent == one
    assert any(agent["blocks"] for agent in page) == (headers is None)
