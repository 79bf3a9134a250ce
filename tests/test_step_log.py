"""The step log: queued writes survive a crash before they commit, exactly once."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from stateloop import Agent, tool
from stateloop.messages import user
from stateloop.persistence import run_blocking
from stateloop.store import AgentRecord, StepRecord, batching, open_store, rows, steplog
from stateloop.store.records import APPEND, RunRecord
from stateloop.store.sql import SqlStore
from stateloop.testing import ScriptedModel, call, reply


def _logs(folder: Path) -> list[Path]:
    return sorted(folder.glob("*-steplog-*"))


def _crash_copy(source: Path, folder: Path) -> Path:
    """The database files and step logs as a process killed now would leave them."""
    folder.mkdir()
    for found in source.parent.glob(source.name + "*"):
        if not found.name.endswith("-shm"):
            shutil.copy(found, folder / found.name)
    return folder / source.name


def _texts(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT text FROM messages ORDER BY seq")]


async def _reopen(path: Path) -> None:
    store = await open_store(f"sqlite:///{path}")  # replays the logs of dead processes
    await store.close()


async def _logged_steps(store: SqlStore, texts: list[str]) -> str:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    run, _ = store.queue_run(agent_id)
    for index, text in enumerate(texts):
        store.queue_step(agent_id, [user(text)], in_context=APPEND,
                         step=StepRecord(run.id, index=index))
        if not store.log_queued():  # what a step does before the next begins
            await store.flush()
    return agent_id


async def test_logged_steps_are_replayed_once_by_the_next_process(store: SqlStore,
                                                                  tmp_path: Path) -> None:
    agent_id = await _logged_steps(store, ["one", "two", "three"])
    assert _texts(store.path) == []  # nothing committed yet
    copy = _crash_copy(store.path, tmp_path / "crashed")

    reopened = await open_store(f"sqlite:///{copy}")
    try:
        assert _texts(copy) == ["one", "two", "three"]
        assert (await reopened.get_agent(agent_id)).in_context_message_ids != []
        runs = await reopened.list_runs(agent_id)
        assert [(r.status, r.step_count) for r in runs] == [("running", 3)]
    finally:
        await reopened.close()
    assert _logs(copy.parent) == []  # the dead process's (and the closed store's own)
    again = await open_store(f"sqlite:///{copy}")  # nothing left to replay
    await again.close()
    assert _texts(copy) == ["one", "two", "three"]


async def test_a_batch_that_committed_is_not_replayed(store: SqlStore, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    await _logged_steps(store, ["one", "two"])
    # Killed after the commit, before the log was emptied.
    monkeypatch.setattr(steplog.StepLog, "committed", lambda self: None)
    await store.flush()
    assert _texts(store.path) == ["one", "two"] and _logs(tmp_path) != []
    copy = _crash_copy(store.path, tmp_path / "crashed")

    reopened = await open_store(f"sqlite:///{copy}")
    await reopened.close()
    assert _texts(copy) == ["one", "two"]
    assert _logs(copy.parent) == []


async def test_a_log_from_before_runs_joined_the_step_writes_is_replayed(
        store: SqlStore, tmp_path: Path) -> None:
    agent_id = (await store.create_agent(AgentRecord(name="a"))).id
    run = RunRecord(agent_id, status="running")
    hello = user("hello")
    hello.token_count = 1
    log = steplog.StepLog(store.path)  # as a process of the earlier version wrote it
    log.append("runs", rows.run_values(run))
    log.append("steps", [agent_id, [rows.message_row(agent_id, hello, run.id, None)], None,
                         [run.id, [5, 1, 0, 0, 0]], "append", None, [], False, time.time()])
    copy = _crash_copy(store.path, tmp_path / "crashed")
    log.close()

    reopened = await open_store(f"sqlite:///{copy}")
    try:
        stored = await reopened.get_run(run.id)
        assert (stored.status, stored.step_count, stored.usage.input_tokens) == ("running", 1, 5)
        assert [m.text for m in await reopened.list_run_messages(stored)] == ["hello"]
    finally:
        await reopened.close()


def _record_ends(data: bytes) -> list[int]:
    """Where each record of a log ends."""
    ends, offset = [], 0
    while (length := int.from_bytes(data[offset:offset + 4], "little")) != 0:
        offset += 8 + length
        ends.append(offset)
    return ends


async def test_a_record_cut_short_is_the_step_in_flight(store: SqlStore, tmp_path: Path) -> None:
    await _logged_steps(store, ["one", "two"])
    copy = _crash_copy(store.path, tmp_path / "crashed")
    (log,) = _logs(copy.parent)
    data = bytearray(log.read_bytes())
    last = _record_ends(bytes(data))[-1]
    data[last - 5:last] = bytes(5)  # its copy into the mapped file was not finished
    log.write_bytes(bytes(data))

    reopened = await open_store(f"sqlite:///{copy}")
    await reopened.close()
    assert _texts(copy) == ["one"]


def test_a_batch_shorter_than_the_one_before_ends_where_it_ends(tmp_path: Path) -> None:
    log = steplog.StepLog(tmp_path / "x.db")
    for text in ("one", "two", "six"):
        log.append("steps", [text])
    log.committed()  # the file is kept, its records overwritten from the start
    log.append("steps", ["ten"])  # as long as "one": it ends exactly where "two" begins
    try:
        assert list(steplog._records(log.path.read_bytes())) == [["batch", [1]],
                                                                   ["steps", ["ten"]]]
    finally:
        log.close()
    assert not log.path.exists()


def test_the_log_grows_for_records_larger_than_its_file(tmp_path: Path) -> None:
    log = steplog.StepLog(tmp_path / "x.db")
    big = "z" * (3 << 20)  # a long tool result
    try:
        log.append("steps", ["small"])
        log.append("steps", [big])
        log.append("steps", ["after"])
        assert list(steplog._records(log.path.read_bytes())) == [
            ["batch", [0]], ["steps", ["small"]], ["steps", [big]], ["steps", ["after"]]]
    finally:
        log.close()


async def test_the_log_of_a_live_process_is_left_alone(store: SqlStore, tmp_path: Path) -> None:
    await _logged_steps(store, ["one"])
    other = await open_store(f"sqlite:///{store.path}")  # recovers on open
    await other.close()
    assert _texts(store.path) == [] and len(_logs(tmp_path)) == 1
    await store.flush()
    assert _texts(store.path) == ["one"]
    await store.close()
    assert _logs(tmp_path) == []
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT count(*) FROM step_logs").fetchone()[0] == 0


async def test_a_step_log_that_cannot_be_written_means_committing_at_once(
        store: SqlStore, caplog: pytest.LogCaptureFixture) -> None:
    log = store._runner._log  # type: ignore[attr-defined]
    log.close()  # let go of the file it holds from the start,
    log.path.mkdir()  # and put something in its way
    await _logged_steps(store, ["one", "two"])
    assert "cannot write the step log" in caplog.text
    assert _texts(store.path) == ["one", "two"]  # each committed before the next step


async def test_without_file_locks_each_step_commits_before_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steplog, "AVAILABLE", False)
    store = await open_store(f"sqlite:///{tmp_path / 'nolocks.db'}")
    try:
        await _logged_steps(store, ["one", "two"])
        assert _texts(store.path) == ["one", "two"] and _logs(tmp_path) == []
    finally:
        await store.close()


async def test_a_run_that_never_yields_keeps_each_step_crash_safe_before_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching, "COMMIT_DELAY", 3600.0)  # commit only when the run ends
    path = tmp_path / "busy.db"
    committed: list[int] = []
    survived: list[int] = []

    @tool
    async def count() -> str:
        """Look at what is committed and what a crash would leave (never yields)."""
        committed.append(len(_texts(path)))
        copy = _crash_copy(path, tmp_path / f"crash{len(committed)}")
        run_blocking(lambda: _reopen(copy))  # in a thread: this event loop does not turn
        survived.append(len(_texts(copy)))
        return "ok"

    steps = 8
    agent = Agent(model=ScriptedModel([call("count")] * steps + [reply("done")]),
                  tools=[count], store=f"sqlite:///{path}", name="busy", max_steps=steps + 1)
    result = await agent.run("go")
    assert result.steps == steps + 1
    # While step k runs, the system prompt, the input and steps 1..k-1 (two messages each)
    # would survive a crash (DESIGN invariant 3), from the step log: nothing committed yet.
    assert survived == [1] + [2 * k for k in range(2, steps + 1)]
    assert committed == [1] * steps
    assert len(_texts(path)) == 2 + 2 * steps + 1  # system, input, steps, reply
    assert _logs(tmp_path) != []  # open while the store is
    store = agent.store
    assert store is not None
    await store.close()
    assert _logs(tmp_path) == []
