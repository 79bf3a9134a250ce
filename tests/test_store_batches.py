"""The ``message_batches`` and ``batch_requests`` tables on SQLite and PostgreSQL: requests are
claimed once however many stores ask, at most a bound of a batch at a time; a batch with an
unknown agent stores nothing; a cancelled batch's pending requests never start; the last
request to end completes its batch; and requests a process that is gone left running go
back to pending, or end as the run they stored ended."""

from __future__ import annotations

import asyncio

import pytest

from stateloop.store import Page, open_store
from stateloop.store.errors import NotFoundError
from stateloop.store.records import AgentRecord, BatchRecord, BatchRequestRecord
from stateloop.store.sql import SqlStore

GONE = "stateloop:0000000000000000"  # a process with no connection


def owner(store: SqlStore) -> str:
    return store.fleet.name if store.fleet is not None else "stateloop:me"


def batch_of(agent_ids: list[str]) -> BatchRecord:
    return BatchRecord(requests=[BatchRequestRecord(agent_id=a, request={"input": f"job {n}"})
                                 for n, a in enumerate(agent_ids)])


async def test_requests_are_claimed_once_a_bounded_number_of_a_batch_at_a_time(
        db_url: str) -> None:
    first, second = await open_store(db_url), await open_store(db_url)
    try:
        agent = await first.create_agent(AgentRecord(name="batched"))
        batches = [batch_of([agent.id] * 10) for _ in range(3)]
        for batch in batches:
            await first.add_batch(batch)
        claims = await asyncio.gather(*(
            store.claim_batch_requests(owner(store), per_batch=3)
            for store in (first, second, first, second)))
        claimed = [r for found in claims for r in found]
        assert len(claimed) == len({r.id for r in claimed}) == 9  # 3 of each batch, once
        for batch in batches:
            mine = sorted(r.position for r in claimed if r.batch_id == batch.id)
            assert mine == [0, 1, 2]  # in order
        assert await second.claim_batch_requests(owner(second), per_batch=3) == []
        done = await first.finish_batch_request(claimed[0].id, "completed", run_id="run-1",
                                                stop_reason="end_turn")
        assert done is None  # its batch has more to run
        [next_one] = await second.claim_batch_requests(owner(second), per_batch=3)
        assert next_one.batch_id == claimed[0].batch_id and next_one.position == 3
        stored = await first.get_batch(claimed[0].batch_id)
        assert [(r.status, r.run_id) for r in stored.requests[:4]] == [
            ("completed", "run-1"), ("running", None), ("running", None), ("running", None)]
    finally:
        await first.close()
        await second.close()


async def test_a_batch_ends_with_its_last_request_or_when_cancelled(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        agent = await store.create_agent(AgentRecord(name="batched"))
        with pytest.raises(NotFoundError, match=r"requests\[1\]"):
            await store.add_batch(batch_of([agent.id, "agent-nobody"]))
        assert await store.list_batches(Page()) == []
        short = batch_of([agent.id, agent.id])
        await store.add_batch(short)
        one, two = await store.claim_batch_requests(owner(store), per_batch=5)
        assert await store.finish_batch_request(one.id, "failed", error="boom") is None
        done = await store.finish_batch_request(two.id, "completed", run_id="run-2")
        assert done is not None and done.status == "completed" and done.completed_at
        assert [(r.status, r.error) for r in done.requests] == [("failed", "boom"),
                                                                ("completed", None)]

        long = batch_of([agent.id] * 4)
        await store.add_batch(long)
        running = await store.claim_batch_requests(owner(store), per_batch=1)
        cancelled = await store.cancel_batch(long.id)
        assert cancelled.status == "cancelled"
        assert [r.status for r in cancelled.requests] == ["running"] + ["cancelled"] * 3
        assert await store.cancelled_batch_requests([r.id for r in running]) == [running[0].id]
        assert await store.claim_batch_requests(owner(store), per_batch=5) == []
        assert await store.finish_batch_request(running[0].id, "cancelled") is None
        assert (await store.cancel_batch(short.id)).status == "completed"  # over: left so
        assert [b.id for b in await store.list_batches(Page(), statuses=["running"])] == []
    finally:
        await store.close()


async def test_requests_of_a_process_that_is_gone_are_taken_over(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        agent = await store.create_agent(AgentRecord(name="orphaned"))
        batch = batch_of([agent.id] * 3)
        await store.add_batch(batch)
        unstarted, started, recorded = await store.claim_batch_requests(GONE, per_batch=3)
        run = await store.create_run(agent.id, metadata={"batch_request_id": started.id})
        ended = await store.create_run(agent.id)
        await store.update_run(ended.id, status="completed", stop_reason="end_turn")
        await store.batch_request_started(recorded.id, ended.id)
        taken = {record.id: found.id
                 for record, found in await store.take_orphaned_batch_requests(owner(store))}
        assert taken == {started.id: run.id, recorded.id: ended.id}
        again = await store.claim_batch_requests(owner(store), per_batch=3)
        assert [r.id for r in again] == [unstarted.id]  # back to pending: it runs again
        assert await store.take_orphaned_batch_requests(owner(store)) == []
    finally:
        await store.close()


async def test_a_callback_a_gone_process_was_to_call_is_taken_over(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        agent = await store.create_agent(AgentRecord(name="called"))
        batch = batch_of([agent.id])
        batch.callback_url = "https://example.com/done"
        await store.add_batch(batch)
        quiet = batch_of([agent.id])  # no callback: nobody's to call
        await store.add_batch(quiet)
        claimed = await store.claim_batch_requests(GONE, per_batch=1)
        for request in claimed:
            done = await store.finish_batch_request(request.id, "completed", owner=GONE)
            assert done is not None and done.status == "completed"
        # the process died before calling back: the next takes the call over, once
        [taken] = await store.take_unsent_batch_callbacks(owner(store))
        assert taken.id == batch.id and taken.callback_url == "https://example.com/done"
        assert await store.take_unsent_batch_callbacks(owner(store)) == []
        await store.batch_called_back(batch.id, {"sent_at": 1.0, "status_code": 200})
        assert await store.take_unsent_batch_callbacks("stateloop:next-server") == []
        assert (await store.get_batch(batch.id)).callback == {"sent_at": 1.0,
                                                              "status_code": 200}
    finally:
        await store.close()
