"""A run's stream read from any server process: two ``stateloop serve`` processes on one
PostgreSQL, a run streamed on one and followed (from a cursor, mid-run) or replayed on the
other; the frames' way through the ``run_frames`` table; nothing of it on SQLite."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from letta_client import Letta

from conftest import raw_sql
from fake_script import Script
from patience import ANSWERS
from stateloop.server.services import run_frames
from stateloop.server.services.run_frames import FrameLog, follow_stored
from stateloop.store import AgentRecord, RunRecord, open_store
from stateloop.store.sql import SqlStore
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply
from test_cli_support import Cli, cli, script, serving  # noqa: F401 (fixtures)

LONG = " ".join(f"word{i}" for i in range(80))  # ~60 chunks of 8 characters


@pytest.fixture(scope="module")
def fake(script: Script) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(script) as server:
        yield server


@pytest.fixture
def held(fake: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The fake with a streamed reply paused after its tenth chunk until ``release`` is set:
    a run stays in flight until the test has seen what it needs."""
    fake.hold_after = 10
    fake.release.clear()
    try:
        yield fake
    finally:
        fake.release.set()
        fake.hold_after = None


def sse(url: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The frames of a streamed POST, as sent (until ``[DONE]``)."""
    with httpx.stream("POST", url, json=body, timeout=ANSWERS) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                yield json.loads(line[len("data: "):])


def test_a_run_is_followed_mid_run_and_replayed_on_another_process(
        cli: Cli, script: Script, held: FakeOpenAI, pg_database: Callable[..., str]) -> None:
    cli.env["STATELOOP_DATABASE_URL"] = pg_database()
    with serving(cli) as first, serving(cli) as second:
        agent = Letta(base_url=first, api_key="x").agents.create(
            model="openai/gpt-4o-mini", memory_blocks=[{"label": "human", "value": ""}])
        script.set(reply(LONG))
        original: list[dict[str, Any]] = []
        ended = threading.Event()

        def stream_on_first() -> None:
            for frame in sse(f"{first}/v1/agents/{agent.id}/messages/stream",
                             {"input": "Say many words", "stream_tokens": True}):
                original.append(frame)
            ended.set()

        thread = threading.Thread(target=stream_on_first)
        thread.start()
        deadline = time.monotonic() + ANSWERS
        while len(original) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        run_id, cursor = original[2]["run_id"], original[2]["seq_id"]
        assert httpx.get(f"{second}/v1/runs/{run_id}",
                         timeout=ANSWERS).json()["status"] == "running"

        followed, live = [], False
        for frame in sse(f"{second}/v1/runs/{run_id}/stream", {"starting_after": cursor}):
            if not followed:
                live = not ended.is_set()  # the first frame came while the run went on
                held.release.set()
            followed.append(frame)
        thread.join(ANSWERS)
        assert live
        assert followed == [f for f in original if f["seq_id"] > cursor]
        assert [f["seq_id"] for f in followed] == list(range(cursor + 1, cursor + 1
                                                             + len(followed)))
        assert [f["message_type"] for f in followed[-2:]] == ["stop_reason", "usage_statistics"]
        assert followed[-2]["stop_reason"] == "end_turn"
        assert "".join(f.get("content", "") for f in original
                       if f["message_type"] == "assistant_message") == LONG

        # Finished: the whole stream again on the other process, from the start.
        assert list(sse(f"{second}/v1/runs/{run_id}/stream", {})) == original
        replayed = list(Letta(base_url=second, api_key="x").runs.messages.stream(run_id))
        assert [f.seq_id for f in replayed] == [f["seq_id"] for f in original]  # type: ignore[union-attr]


def test_on_sqlite_frames_stay_in_memory(cli: Cli, script: Script) -> None:
    with serving(cli) as server:
        client = Letta(base_url=server, api_key="x")
        agent = client.agents.create(model="openai/gpt-4o-mini")
        script.set(reply("Hello there."))
        frames = list(sse(f"{server}/v1/agents/{agent.id}/messages/stream", {"input": "hi"}))
        resumed = list(sse(f"{server}/v1/runs/{frames[0]['run_id']}/stream",
                           {"starting_after": 1}))
        assert resumed == frames[1:]
    with sqlite3.connect(cli.db) as db:
        assert db.execute("SELECT count(*) FROM run_frames").fetchone() == (0,)


async def _running(store: SqlStore) -> RunRecord:
    agent = await store.create_agent(AgentRecord(name="a", system="s"))
    return await store.create_run(agent.id, status="running")


def _frame(seq: int) -> dict[str, Any]:
    return {"message_type": "assistant_message", "content": f"part {seq}", "seq_id": seq}


async def test_frames_are_written_in_batches_keeping_the_last_of_each_run(db_url: str) -> None:
    async with await open_store(db_url) as store:  # the server writes them on PostgreSQL only
        run = await _running(store)
        raw_sql(store, "INSERT INTO run_frames VALUES ('run-old', 1, '{}', ?)",
                (time.time() - 2 * run_frames.KEEP_FOR,))
        writes = 0
        append = store.append_run_frames

        async def counted(*args: Any, **kwargs: Any) -> None:
            nonlocal writes
            writes += 1
            await append(*args, **kwargs)

        store.append_run_frames = counted  # type: ignore[method-assign]
        log = FrameLog(store, keep=5)
        for seq in range(1, 9):  # one token at a time, as a stream sends them
            log.add(run.id, [_frame(seq)])
        log.end(run.id, 8)
        await log.close()
        assert writes == 1
        page = await store.read_run_frames(run.id, 0, limit=100)
        assert page.frames == [*((seq, _frame(seq)) for seq in range(4, 9)), (9, None)]
        # The first write also deleted frames older than they are kept.
        assert raw_sql(store, "SELECT count(*) FROM run_frames WHERE run_id = 'run-old'") == [
            (0,)]


async def test_a_reader_ends_when_the_runs_row_says_its_process_stopped(
        pg_database: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_frames, "END_GRACE", 0.2)
    async with await open_store(pg_database()) as store:
        run = await _running(store)
        await store.append_run_frames([(run.id, 1, _frame(1)), (run.id, 2, _frame(2))], keep=10)
        got: list[dict[str, Any] | None] = []

        async def read() -> None:
            async for frame in follow_stored(store, run.id, 0, ping_interval=0.1):
                got.append(frame)

        reader = asyncio.create_task(read())
        await asyncio.sleep(0.5)
        assert not reader.done()  # no end row, and the run's row says it goes on
        assert got[:2] == [_frame(1), _frame(2)] and None in got[2:]  # then pings
        # Its process died before it wrote more: the run is marked failed elsewhere.
        await store.update_run(run.id, status="failed", stop_reason="error")
        await asyncio.wait_for(reader, 5)
        assert [f["message_type"] for f in got[-2:] if f] == ["stop_reason", "usage_statistics"]
        assert got[-2] == {"message_type": "stop_reason", "stop_reason": "error"}
