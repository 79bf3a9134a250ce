"""Messages, steps and runs: atomic checkpoints, pagination, recall search."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import database_url, raw_sql
from stateloop.messages import Message, ToolCall, Usage, assistant, system, tool_result, user
from stateloop.store import (
    AgentRecord,
    NotFoundError,
    StepRecord,
    StoreError,
    open_store,
)
from stateloop.store.records import APPEND
from stateloop.store.sql import SqlStore


@pytest.fixture(params=["sqlite", "sqlite+aiosqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await open_store(database_url(request.param, tmp_path, request))
    yield s
    await s.close()


async def _agent(store: SqlStore, name: str = "a") -> str:
    return (await store.create_agent(AgentRecord(name=name))).id


async def test_append_step_writes_messages_step_usage_and_context(store: SqlStore) -> None:
    agent_id = await _agent(store)
    run = await store.create_run(agent_id, status="running")
    sys_msg, question = system("You are helpful."), user("What is 1+2?")
    call = ToolCall("call-1", "add", {"a": 1, "b": 2})
    answer, result = assistant(tool_calls=[call]), tool_result(call, "3")
    await store.append_step(agent_id, [sys_msg, question], in_context_ids=[sys_msg.id,
                                                                          question.id])
    step = StepRecord(run.id, model="scripted", usage=Usage(100, 7, cached_input_tokens=50),
                      latency_ms=12.5)
    ids = [sys_msg.id, question.id, answer.id, result.id]
    await store.append_step(agent_id, [answer, result], in_context_ids=ids, step=step)
    await store.append_step(agent_id, [], step=StepRecord(run.id, index=1, usage=Usage(5, 1)))

    assert (await store.get_agent(agent_id)).in_context_message_ids == ids
    loaded = await store.get_messages(ids)
    assert [m.to_dict() for m in loaded] == [m.to_dict() for m in
                                              (sys_msg, question, answer, result)]
    assert loaded[2].tool_calls[0].arguments == {"a": 1, "b": 2}
    got = await store.get_run(run.id)
    assert (got.usage.input_tokens, got.usage.output_tokens, got.step_count) == (105, 8, 2)
    assert got.usage.cached_input_tokens == 50
    steps = await store.list_steps(run.id)
    assert [(s.index, s.model, s.latency_ms) for s in steps] == [(0, "scripted", 12.5),
                                                                  (1, None, None)]
    assert await store.count_messages(agent_id) == 4


async def test_every_kind_of_message_reads_back_whole_from_a_row_without_repeats(
        store: SqlStore) -> None:
    from stateloop.messages import ImagePart, ReasoningPart, TextPart

    agent_id = await _agent(store)
    run = await store.create_run(agent_id, status="running")
    call = ToolCall("call-9", "lookup", {"q": "zebra"}, '{"q": "zebra"}')
    broken = ToolCall("call-10", "lookup", {}, '{"q": ', "not valid JSON")
    messages = [
        Message("user", [TextPart("find the zebra"), ImagePart("data:image/png;base64,AA",
                                                              "image/png")]),
        Message("assistant", [ReasoningPart("think", "sig", "m", False), TextPart("zebra?")],
                [call, broken], metadata={"kind": "note", "n": [1, 2]}, token_count=42),
        tool_result(call, "a zebra was found", is_error=False),
        tool_result(broken, "bad zebra arguments", is_error=True),
    ]
    messages[2].token_count = 7
    await store.append_step(agent_id, messages, in_context_ids=APPEND,
                            step=StepRecord(run.id, model="m"))
    expected = [m.to_dict() for m in messages]
    ids = [m.id for m in messages]
    assert [m.to_dict() for m in await store.get_messages(ids)] == expected
    assert [m.to_dict() for m in await store.list_messages(agent_id)] == expected
    assert [m.to_dict() for m in
            await store.list_run_messages(await store.get_run(run.id))] == expected
    hits = await store.search_messages(agent_id, "zebra", include_tool=True, limit=10)
    assert sorted(h.message.id for h in hits) == sorted(ids)
    assert all(h.message.to_dict() == expected[ids.index(h.message.id)] for h in hits)
    stored = [row[0] for row in raw_sql(store, "SELECT data FROM messages ORDER BY seq")]
    assert all('"role"' not in data and '"created_at"' not in data for data in stored)


async def test_the_context_grows_by_appended_steps_without_rewriting_its_list(
        store: SqlStore, tmp_path: Path) -> None:
    agent_id = await _agent(store)
    first, second, aside, third, fourth, fifth = (user(t) for t in ("1", "2", "aside", "3",
                                                                    "4", "5"))
    await store.append_step(agent_id, [first], in_context_ids=[first.id])
    await store.append_step(agent_id, [second], in_context_ids=APPEND)
    await store.append_step(agent_id, [user("kept out")])  # stored, not in context
    await store.append_step(agent_id, [third], in_context_ids=APPEND)
    ids = [first.id, second.id, third.id]
    assert (await store.get_agent(agent_id)).in_context_message_ids == ids
    third = user("3 again")
    # Queued together (on the inline runner: one transaction), applied in order.
    store.queue_step(agent_id, [aside])  # stored, not in context
    store.queue_step(agent_id, [third], in_context=APPEND)
    store.queue_step(agent_id, [fourth], in_context=[first, fourth])
    store.queue_step(agent_id, [], in_context=APPEND)
    await store.flush()
    assert (await store.get_agent(agent_id)).in_context_message_ids == [first.id, fourth.id]
    await store.append_step(agent_id, [fifth], in_context_ids=APPEND)
    expected = [first.id, fourth.id, fifth.id]
    assert (await store.get_agent(agent_id)).in_context_message_ids == expected
    assert [a.in_context_message_ids for a in await store.list_agents()] == [expected]
    # the list was written twice
    stored = raw_sql(store, "SELECT in_context_message_ids FROM agents")[0][0]
    assert stored == f'["{first.id}","{fourth.id}"]'
    await store.set_in_context(agent_id, [third.id])
    await store.append_step(agent_id, [user("6")], in_context_ids=APPEND)
    assert (await store.get_agent(agent_id)).in_context_message_ids[0] == third.id
    assert len((await store.get_agent(agent_id)).in_context_message_ids) == 2


async def test_step_records_ride_on_messages_and_add_up_on_their_run(
        store: SqlStore, tmp_path: Path) -> None:
    agent_id = await _agent(store)
    run = await store.create_run(agent_id, status="running")
    before = await store.create_run(agent_id, status="running")  # earlier messages, other run
    await store.append_step(agent_id, [user("other run")], step=StepRecord(before.id))
    call = ToolCall("call-1", "add", {"a": 1, "b": 2})
    answer, result = assistant(tool_calls=[call]), tool_result(call, "3")
    first = StepRecord(run.id, model="m", provider="p", usage=Usage(10, 2, 1, 1, 3),
                       latency_ms=5.0, finish_reason="tool_calls", metadata={"k": [1]})
    await store.append_step(agent_id, [answer, result], step=first)
    await store.append_step(agent_id, [], step=StepRecord(run.id, index=1, usage=Usage(4, 1),
                                                          error="model unreachable"))
    await store.append_step(agent_id, [assistant("done")],
                            step=StepRecord(run.id, index=2, usage=Usage(20, 5)))

    carried = raw_sql(store, "SELECT id FROM messages WHERE step IS NOT NULL "
                      "AND run_id = ?", (run.id,))
    separate = raw_sql(store, "SELECT count(*) FROM steps")[0][0]
    assert carried[0][0] == result.id  # on the step's last row
    assert (len(carried), separate) == (2, 1)
    steps = await store.list_steps(run.id)
    assert [(s.index, s.error) for s in steps] == [(0, None), (1, "model unreachable"),
                                                   (2, None)]
    assert steps[0] == first  # every field kept
    live = await store.get_run(run.id)
    assert (live.step_count, live.usage) == (3, Usage(34, 8, 1, 1, 3))
    ended = await store.update_run(run.id, status="completed")
    assert (ended.step_count, ended.usage) == (3, Usage(34, 8, 1, 1, 3))
    assert (await store.get_run(run.id)) == ended
    stored = raw_sql(store, "SELECT step_count, input_tokens FROM runs WHERE id = ?",
                     (run.id,))[0]
    assert stored == (3, 34)
    assert (await store.get_run(before.id)).step_count == 1
    assert [m.text for m in await store.list_run_messages(ended)] == ["", "3", "done"]


async def test_a_failing_step_leaves_nothing_written(store: SqlStore) -> None:
    agent_id = await _agent(store)
    run = await store.create_run(agent_id, status="running")
    first = user("hello")
    await store.append_step(agent_id, [first], in_context_ids=[first.id])

    # A duplicate message id makes the insert fail after other rows of the step went in.
    fresh, dup = assistant("new"), Message.from_dict(first.to_dict())
    with pytest.raises(StoreError, match="append_step"):
        await store.append_step(agent_id, [fresh, dup], in_context_ids=[first.id, fresh.id],
                                step=StepRecord(run.id, usage=Usage(10, 10)))
    # A failure in the last statement (the context's), after every other went in.
    if store.dialect == "sqlite":
        raw_sql(store, "CREATE TRIGGER fail_context BEFORE UPDATE OF in_context_message_ids "
                "ON agents BEGIN SELECT RAISE(ABORT, 'disk on fire'); END")
    else:
        raw_sql(store, "CREATE OR REPLACE FUNCTION fire() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'disk on fire' USING ERRCODE = 'check_violation'; "
                "END $$")
        raw_sql(store, "CREATE TRIGGER fail_context BEFORE UPDATE OF in_context_message_ids "
                "ON agents FOR EACH ROW EXECUTE FUNCTION fire()")
    with pytest.raises(StoreError, match="disk on fire"):
        await store.append_step(agent_id, [fresh], in_context_ids=[first.id, fresh.id],
                                step=StepRecord(run.id, usage=Usage(10, 10)))
    raw_sql(store, "DROP TRIGGER fail_context" + ("" if store.dialect == "sqlite"
                                                  else " ON agents"))

    assert await store.count_messages(agent_id) == 1
    assert (await store.get_agent(agent_id)).in_context_message_ids == [first.id]
    got = await store.get_run(run.id)
    assert (got.step_count, got.usage.input_tokens) == (0, 0)
    assert await store.list_steps(run.id) == []
    with pytest.raises(NotFoundError):
        await store.get_messages([fresh.id])
    # and the store still works afterwards
    await store.append_step(agent_id, [fresh], in_context_ids=[first.id, fresh.id])
    assert await store.count_messages(agent_id) == 2


async def test_list_messages_pages_with_cursors(store: SqlStore) -> None:
    agent_id = await _agent(store)
    other = await _agent(store, "other")
    msgs = [user(f"m{i}") for i in range(10)]
    for i in range(0, 10, 2):
        await store.append_step(agent_id, msgs[i:i + 2])
    await store.append_step(other, [user("not mine")])
    texts = [m.text for m in await store.list_messages(agent_id, limit=4)]
    assert texts == ["m0", "m1", "m2", "m3"]
    page = await store.list_messages(agent_id, after=msgs[3].id, limit=4)
    assert [m.text for m in page] == ["m4", "m5", "m6", "m7"]
    page = await store.list_messages(agent_id, before=msgs[3].id, order="desc", limit=2)
    assert [m.text for m in page] == ["m2", "m1"]
    assert await store.count_messages(agent_id) == 10
    order = [msgs[5].id, msgs[1].id]
    assert [m.text for m in await store.get_messages(order)] == ["m5", "m1"]


async def test_runs_lifecycle_and_interrupted_runs(store: SqlStore) -> None:
    agent_id = await _agent(store)
    done = await store.create_run(agent_id)
    await store.update_run(done.id, status="running")
    finished = await store.update_run(done.id, status="completed", stop_reason="end_turn")
    assert finished.started_at is not None and finished.completed_at is not None
    agent = await store.get_agent(agent_id)
    assert agent.last_stop_reason == "end_turn" and agent.last_run_duration_ms is not None

    stuck = await store.create_run(agent_id, status="running")
    assert await store.fail_interrupted_runs() == [stuck.id]
    failed = await store.get_run(stuck.id)
    assert (failed.status, failed.stop_reason) == ("failed", "error")
    assert "interrupted" in (failed.error or "")
    assert [r.id for r in await store.list_runs(agent_id, status="completed")] == [done.id]
    with pytest.raises(ValueError, match="run status"):
        await store.update_run(done.id, status="exploded")
    with pytest.raises(NotFoundError):
        await store.create_run("agent-missing")


async def test_runs_are_left_running_while_another_store_has_the_database_open(
        store: SqlStore) -> None:
    if store.path is None:
        pytest.skip("a file lock per store is SQLite's (test_store_postgres.py has the other)")
    agent_id = await _agent(store)
    stuck = await store.create_run(agent_id, status="running")
    dead = store.path.with_name(f"{store.path.name}-open-0123456789abcdef")
    dead.touch()  # what a killed process leaves: a file nobody holds locked
    other = await open_store(f"sqlite:///{store.path}")
    try:
        assert await store.fail_interrupted_runs() == []  # the other store's runs may be live
    finally:
        await other.close()
    assert await store.fail_interrupted_runs() == [stuck.id]
    assert not dead.exists()
    assert len(list(store.path.parent.glob("*-open-*"))) == 1  # this store's own


async def test_recall_ranks_matches_and_filters(store: SqlStore) -> None:
    agent_id = await _agent(store)
    other = await _agent(store, "other")
    jan = datetime(2025, 1, 10, tzinfo=UTC).timestamp()
    mar = datetime(2025, 3, 10, tzinfo=UTC).timestamp()
    strong = user("My cat Tom loves tuna. Tom the cat is orange.")
    weak = assistant("Cats are nice animals, I hear.")
    unrelated = user("The weather in Paris is grey.")
    early = user("Tom's cat appointment is on Tuesday")
    early.created_at = jan
    for m in (strong, weak, unrelated):
        m.created_at = mar
    call = ToolCall("c1", "web_search", {"query": "cat food"})
    tool_msg = tool_result(call, "cat food prices: tuna 3 EUR")
    tool_msg.created_at = mar
    await store.append_step(agent_id, [early, strong, weak, unrelated])
    await store.append_step(agent_id, [assistant(tool_calls=[call]), tool_msg])
    await store.append_step(other, [user("cat cat cat Tom tuna")])
    await store.set_in_context(agent_id, [unrelated.id])  # evicted messages stay searchable

    hits = await store.search_messages(agent_id, "Tom cat tuna")
    assert hits[0].message.id == strong.id
    assert {h.message.id for h in hits} >= {strong.id, early.id}
    assert all(h.agent_id == agent_id for h in hits)
    assert tool_msg.id not in {h.message.id for h in hits}
    assert hits == sorted(hits, key=lambda h: -h.score)
    with_tools = await store.search_messages(agent_id, "tuna prices", include_tool=True)
    assert tool_msg.id in {h.message.id for h in with_tools}
    only_assistant = await store.search_messages(agent_id, "cats", roles=["assistant"])
    assert [h.message.id for h in only_assistant] == [weak.id]
    in_january = await store.search_messages(agent_id, "cat", start_date="2025-01-01",
                                              end_date="2025-01-31")
    assert [h.message.id for h in in_january] == [early.id]
    assert await store.search_messages(agent_id, "cat", end_date="2024-12-31") == []
    assert await store.search_messages(agent_id, 'cat" OR "') != []  # quoting is safe
    recent = await store.search_messages(agent_id, "  ", limit=2)
    assert len(recent) == 2


async def test_recall_indexes_in_batches_but_search_always_sees_everything(
        tmp_path: Path) -> None:
    path = tmp_path / "batch.db"
    store = await open_store(f"sqlite:///{path}")
    agent_id = await _agent(store)
    for i in range(100):
        await store.append_step(agent_id, [user(f"note number {i} about item{i}")])
    hits = await store.search_messages(agent_id, "item99")
    assert [h.message.text for h in hits] == ["note number 99 about item99"]
    await store.close()
    reopened = await open_store(f"sqlite:///{path}")
    late = user("a late zanzibar note")
    await reopened.append_step(agent_id, [late])
    assert [h.message.id for h in await reopened.search_messages(agent_id, "zanzibar")] == [
        late.id]
    await reopened.delete_agent(agent_id)  # the FTS delete trigger must not corrupt the index
    other = await _agent(reopened, "other")
    await reopened.append_step(other, [user("zanzibar again")])
    assert len(await reopened.search_messages(other, "zanzibar")) == 1
    await reopened.close()


async def test_tool_noise_is_indexed_when_first_searched_and_edits_keep_the_index_whole(
        tmp_path: Path) -> None:
    path = tmp_path / "noise.db"
    store = await open_store(f"sqlite:///{path}")
    agent_id = await _agent(store)
    call = ToolCall("c1", "lookup", {"query": "zebra"})
    steps = [[assistant(tool_calls=[call]), tool_result(call, f"zebra fact {i}")]
             for i in range(40)]
    for step in steps:
        await store.append_step(agent_id, [user("tell me about zebras"), *step])

    def marks() -> tuple[int, int, int]:
        with sqlite3.connect(path) as db:
            text, tool = db.execute(
                "SELECT indexed_seq, tool_indexed_seq FROM recall_index").fetchone()
            return text, tool, db.execute("SELECT max(seq) FROM messages").fetchone()[0]

    assert [h.message.role for h in await store.search_messages(agent_id, "zebras")] == [
        "user"] * 10
    text_mark, tool_mark, last = marks()
    assert text_mark == last and tool_mark == 0  # tool noise not indexed yet
    hits = await store.search_messages(agent_id, "fact 7", include_tool=True)
    assert hits[0].message.text == "zebra fact 7"
    assert marks()[1] == last

    # Edits and deletes of indexed and unindexed rows alike leave a consistent index.
    late = tool_result(call, "an unindexed okapi fact")
    await store.append_step(agent_id, [late])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE messages SET text = 'now an okapi remark', tool_text = NULL "
                   "WHERE id = ?", (late.id,))
        db.execute("UPDATE messages SET text = '', tool_text = 'zebra fact 3 redacted' "
                   "WHERE id = ?", (steps[3][1].id,))
        db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    okapi = await store.search_messages(agent_id, "okapi", roles=["tool"])  # by its text
    assert [h.message.id for h in okapi] == [late.id]
    redacted = await store.search_messages(agent_id, "redacted", include_tool=True)
    assert [h.message.id for h in redacted] == [steps[3][1].id]
    await store.delete_agent(agent_id)
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
        assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    await store.close()
