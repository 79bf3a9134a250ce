"""Every list route pages: walked from the app's own routes (each GET that takes
``limit``), each over a list far larger than a page, reads about a page of rows; a
``limit`` past the bound is refused, naming it."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, select

from stateloop.messages import assistant
from stateloop.server.app import create_app
from stateloop.server.pagination import MAX_PAGE
from stateloop.store import (
    BlockRecord,
    IdentityRecord,
    Page,
    RunRecord,
    StepRecord,
    open_store,
    schema,
)
from stateloop.store import rows as store_rows
from stateloop.store.fastpath import InsertRows
from stateloop.store.records import ConversationRecord
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_list_pages import T0, _read, served
from test_server_support import Server, client, fake, script, server  # noqa: F401 (fixtures)

LONG = 300  # one agent's blocks, passages, conversations; one run's steps, one step's messages


async def _fill_lists(url: str, agents: list[str], folder: str, shared: str
                      ) -> dict[str, str]:
    """One agent (the last) with many of everything a list route shows of an agent: a run
    of many messages and steps, a step of many messages, blocks, tools, folders, groups,
    passages; another with many conversations, one of many messages; a folder, an archive
    and an identity that many agents share. The ids the routes' paths take."""
    busy, talker = agents[-1], agents[-2]
    store = await open_store(url)
    try:
        run = RunRecord(agent_id=busy, status="completed", created_at=T0)
        long_step = StepRecord(run.id, busy, index=LONG, created_at=T0 + LONG)
        steps = [StepRecord(run.id, busy, index=n, created_at=T0 + n) for n in range(LONG)]
        carried = [store_rows.message_row(busy, assistant(f"step {n}"), run.id, step.id, step)
                   for n, step in enumerate(steps)]
        carried += [store_rows.message_row(busy, assistant(f"said {n}"), run.id, long_step.id,
                                           long_step if n == LONG - 1 else None)
                    for n in range(LONG)]
        for n in range(LONG):
            await store.create_block(BlockRecord(label=f"block-{n}", created_at=T0 + n),
                                     agent_id=busy)
        tools = await store.list_tools()
        await store.update_agent(busy, tool_names=[t.name for t in tools])
        everyone = await store.create_identity(IdentityRecord(
            identifier_key="everyone", name="All", identity_type="org"))
        await store.update_agent(talker, model="openai/gpt-4o-mini")
        archive = (await store.list_archives(page=Page(limit=1)))[0]
        blocks = await store.list_blocks(page=Page(limit=LONG))
        folders = await store.list_folders()
        groups = await store.list_groups()
        conversations = [ConversationRecord(talker, created_at=T0 + n) for n in range(LONG)]
        in_thread = [assistant(f"in thread {n}") for n in range(LONG)]
        await store._runner.write(lambda conn: (
            conn.execute(insert(schema.runs), [store_rows.run_values(run)]),
            InsertRows(schema.messages, store_rows.MESSAGE_COLUMNS).execute(
                conn, carried, keys=False),
            conn.execute(insert(schema.folders_agents), [
                {"folder_id": folder, "agent_id": agent_id, "created_at": T0 + n}
                for n, agent_id in enumerate(agents)]),
            conn.execute(insert(schema.folders_agents), [
                {"folder_id": f.id, "agent_id": busy, "created_at": T0 + n}
                for n, f in enumerate(folders) if f.id != folder]),
            conn.execute(insert(schema.files_agents), [
                {"id": f"file-agent-{n:04d}", "agent_id": busy, "file_id": file_id,
                 "folder_id": folder, "file_name": name, "is_open": False,
                 "last_accessed_at": T0 + n}
                for n, (file_id, name) in enumerate(conn.execute(
                    select(schema.files.c.id, schema.files.c.file_name)
                    .where(schema.files.c.folder_id == folder)).all())]),
            conn.execute(insert(schema.archives_agents), [
                {"archive_id": archive.id, "agent_id": agent_id, "is_owner": False,
                 "created_at": T0 + n} for n, agent_id in enumerate(agents)]),
            conn.execute(insert(schema.identities_agents), [
                {"identity_id": everyone.id, "agent_id": agent_id} for agent_id in agents]),
            conn.execute(insert(schema.identities_blocks), [
                {"identity_id": everyone.id, "block_id": b.id} for b in blocks]),
            conn.execute(insert(schema.group_members), [
                {"group_id": g.id, "agent_id": busy, "position": 2} for g in groups]),
            conn.execute(insert(schema.passages), [
                {"id": f"passage-{n:04d}", "archive_id": archive.id, "text": f"fact {n}",
                 "tags": [], "metadata": {}, "created_at": T0 + n} for n in range(LONG)]),
            conn.execute(insert(schema.conversations), [
                {"id": c.id, "agent_id": talker, "in_context_message_ids": [],
                 "in_context_after_seq": 1 << 40, "isolated_block_ids": [],
                 "created_at": c.created_at, "updated_at": c.created_at}
                for c in conversations]),
            InsertRows(schema.messages, store_rows.MESSAGE_COLUMNS).execute(conn, [
                store_rows.message_row(talker, said, None, None) for said in in_thread],
                keys=False),
            conn.execute(schema.messages.update()
                         .where(schema.messages.c.id.in_([said.id for said in in_thread]))
                         .values(conversation_id=conversations[0].id))))
        await store.set_in_context(busy, [])  # its history is in recall, out of context
        return {"agent_id": busy, "talker": talker, "run_id": run.id, "step_id": long_step.id,
                "block_id": shared, "identity_id": everyone.id, "archive_id": archive.id,
                "group_id": groups[0].id, "conversation_id": conversations[0].id,
                "folder_id": folder, "source_id": folder}
    finally:
        await store.close()


@dataclass
class Filled:
    """A server over the filled database, and the ids each list route's path takes."""

    server: Server
    lists: dict[str, str]


@pytest.fixture(scope="module")
def filled(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Filled]:
    db: Path = tmp_path_factory.mktemp("routes") / "stateloop.db"
    with served(fake, db) as (running, agents, _, shared, _, folder):
        lists = asyncio.run(_fill_lists(f"sqlite:///{db}", agents, folder, shared))
        yield Filled(running, lists)


# Every list route (a GET that takes ``limit``), and the query that makes its list long.
LISTS = {
    "/v1/agents": "", "/v1/blocks": "", "/v1/tools": "", "/v1/runs": "", "/v1/steps": "",
    "/v1/identities": "identity_type=user", "/v1/archives": "", "/v1/groups": "",
    "/v1/folders": "", "/v1/tags": "", "/v1/messages": "",
    "/v1/conversations": "agent_id={talker}",
    "/v1/agents/{agent_id}/messages": "", "/v1/agents/{agent_id}/core-memory/blocks": "",
    "/v1/agents/{agent_id}/tools": "",
    "/v1/agents/{agent_id}/archival-memory": "ascending=false&search=FACT",
    "/v1/agents/{agent_id}/groups": "", "/v1/agents/{agent_id}/folders": "",
    "/v1/agents/{agent_id}/sources": "", "/v1/agents/{agent_id}/files": "",
    "/v1/blocks/{block_id}/agents": "", "/v1/runs/{run_id}/messages": "",
    "/v1/runs/{run_id}/steps": "", "/v1/steps/{step_id}/messages": "",
    "/v1/identities/{identity_id}/agents": "", "/v1/identities/{identity_id}/blocks": "",
    "/v1/archives/{archive_id}/agents": "", "/v1/groups/{group_id}/messages": "",
    "/v1/conversations/{conversation_id}/messages": "",
    "/v1/folders/{folder_id}/files": "", "/v1/sources/{source_id}/files": "",
    "/v1/folders/{folder_id}/passages": "", "/v1/sources/{source_id}/passages": "",
    "/v1/folders/{folder_id}/agents": "",
}
# What letta-client 1.x sends: it gets agents without relationships unless it names them.
SDK = {"X-Stainless-Package-Version": "1.0.0"}
# Lists paged their own way, each checked below: an agent's memory commits, newest first, paged
# by ``before`` (a commit's seq), as ``git log`` reads.
PAGED_BY_SEQ = {"/v1/agents/{agent_id}/memory/commits": ""}
# Lists of few rows, paged by a cursor in SQL and read through letta-client in their own
# tests, with why they are not filled here.
PAGED_BY_ID = {
    "/v1/agents/{agent_id}/schedule": "an agent's scheduled messages (at most 100 pending): "
                                      "test_server_schedules.py pages them",
    "/v1/messages/batches": "the batches running now, by (created_at, id): "
                            "test_server_batches.py pages them",
    "/v1/messages/batches/{batch_id}/messages": "the messages of a batch's runs (at most 500), "
                                                "by seq: test_server_batches.py pages them",
    "/v1/api-keys": "API keys by (created_at, id): test_server_access.py lists them",
    "/v1/audit": "the audit log by seq, newest first (before): test_server_access.py pages it",
    "/v1/client-side-access-tokens": "unexpired tokens newest first, by offset in SQL (with "
                                     "agentId, the unexpired tokens are read and filtered): "
                                     "test_server_access.py lists them",
}
# List routes with nothing to bound, and why.
UNBOUNDED = {
    "/v1/jobs": "no jobs of Letta's job type are kept (a batch is of type batch): always an "
                "empty list, read from nothing",
    "/v1/jobs/active": "no jobs of Letta's job type are kept: always an empty list, read "
                       "from nothing",
    "/v1/providers": "the environment's providers and at most 200 added ones (the cap)",
    "/v1/runs/{run_id}/trace": "one run's spans, rebuilt from its steps (bounded by the "
                               "run's max_steps); limit caps the answer at 5,000",
}


def _list_routes() -> set[str]:
    spec = create_app().openapi()
    return {path for path, operations in spec["paths"].items()
            if any(p["name"] == "limit" and p["in"] == "query"
                   for p in operations.get("get", {}).get("parameters", []))}


def test_every_list_route_is_bounded_here() -> None:
    routes = _list_routes()
    known = set(LISTS) | set(PAGED_BY_SEQ) | set(PAGED_BY_ID) | set(UNBOUNDED)
    assert routes == known, routes ^ known


def test_memory_commits_read_a_page(filled: Filled) -> None:
    """The busy agent's blocks made some 300 commits; a page, and the page before a commit,
    read about a page of rows."""
    path = "/v1/agents/{agent_id}/memory/commits".format(**filled.lists)
    first, _ = _read(filled.server, f"{path}?limit=10")
    assert len(first) == 10
    seqs = [commit["seq"] for commit in first]
    assert seqs == sorted(seqs, reverse=True)
    older, counted = _read(filled.server, f"{path}?limit=10&before={seqs[4]}")
    assert [commit["seq"] for commit in older][:5] == seqs[5:]
    for page in (f"{path}?limit=10", f"{path}?limit=10&before={seqs[4]}"):
        _, counted = _read(filled.server, page)
        assert counted.rows <= 100, (page, counted.rows)
        assert counted.statements <= 16, (page, counted.statements)


def _items(body: Any) -> list[Any]:
    return body["files"] if isinstance(body, dict) else body


def _id(item: Any) -> str:
    return item if isinstance(item, str) else item.get("id") or item["name"]


@pytest.mark.parametrize("route", sorted(LISTS))
def test_every_list_route_reads_a_page(filled: Filled, route: str) -> None:
    """Each list, of a table far larger than a page (some 300 rows or more), reads about a
    page of rows, from either end and after a cursor: as a 1.x SDK asks, agents without
    their relationships (an agent's 300 blocks are a list of their own)."""
    server = filled.server
    ids = filled.lists
    query = LISTS[route].format(**ids)
    path = route.format(**ids) + "?" + (query + "&" if query else "")
    for order in ("asc", "desc"):
        first, _ = _read(server, f"{path}limit=10&order={order}", SDK)
        assert len(_items(first)) == 10, (route, order)
        walked = [f"{path}limit=10&order={order}",
                  f"{path}limit=10&order={order}&after={_id(_items(first)[4])}"]
        for page_path in walked:
            page, counted = _read(server, page_path, SDK)
            assert 0 < len(_items(page)) <= 10, page_path
            assert counted.rows <= 100, (page_path, counted.rows)
            assert counted.statements <= 16, (page_path, counted.statements)


def test_a_page_is_at_most_the_bound(filled: Filled) -> None:
    """``limit`` past the bound is refused, naming it (Letta's 1,000 on runs); at the bound,
    a page reads no more than the table holds."""
    for route in ("/v1/agents", "/v1/blocks", "/v1/agents/{agent_id}/core-memory/blocks",
                  "/v1/folders/{folder_id}/agents"):
        path = route.format(**filled.lists)
        refused = httpx.get(f"{filled.server.url}{path}?limit={10 ** 18}")
        assert refused.status_code == 422, refused.text
        assert str(MAX_PAGE) in refused.text and "limit" in refused.text
        page, _ = _read(filled.server, f"{path}?limit={MAX_PAGE}")
        assert 0 < len(page) <= MAX_PAGE
    refused = httpx.get(f"{filled.server.url}/v1/runs?limit=1001")
    assert refused.status_code == 422 and "1000" in refused.text, refused.text
    runs, _ = _read(filled.server, "/v1/runs?limit=1000")
    assert len(runs) == 1000
