"""The ``scheduled_messages`` table on SQLite and PostgreSQL: a due time is claimed once
however many stores ask, a recurring schedule moves to its next time, claims left by a
process that is gone are taken over with the run stored for them (if any), and schedules go
with their agent."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from stateloop.cron import next_time
from stateloop.store import open_store
from stateloop.store.records import AgentRecord, ScheduleRecord
from stateloop.store.sql import SqlStore

T0 = datetime(2031, 3, 4, 9, 0, tzinfo=UTC).timestamp()
GONE = "stateloop:0000000000000000"  # a process with no connection


def one_time(agent_id: str, at: float) -> ScheduleRecord:
    return ScheduleRecord(agent_id=agent_id, request={"messages": []},
                          schedule={"type": "one-time", "scheduled_at": at * 1000}, next_at=at)


def owner(store: SqlStore) -> str:
    return store.fleet.name if store.fleet is not None else "stateloop:me"


async def test_a_due_time_is_claimed_once_and_a_cron_schedule_moves_on(db_url: str) -> None:
    first, second = await open_store(db_url), await open_store(db_url)
    try:
        agent = await first.create_agent(AgentRecord(name="scheduled"))
        for n in range(20):
            await first.add_schedule(one_time(agent.id, T0 + n), limit=100)
        cron = ScheduleRecord(agent_id=agent.id, request={"messages": []},
                              schedule={"type": "recurring", "cron_expression": "*/5 * * * *"},
                              next_at=T0 + 300)
        await first.add_schedule(cron, limit=100)
        assert await first.next_schedule_due() == T0
        claims = await asyncio.gather(*(
            store.claim_due_schedules(T0 + 600, next_time, owner(store), limit=7)
            for store in (first, second, first, second, first)))
        ids = [r.id for batch in claims for r in batch]
        assert len(ids) == len(set(ids)) == 21  # each once, all of them
        again = await second.claim_due_schedules(T0 + 600, next_time, owner(second))
        assert again == []
        moved = await first.get_schedule(agent.id, cron.id)
        assert moved is not None and moved.next_at == T0 + 900  # after the firing's time
        assert moved.fired_count == 1 and moved.last_fired_at == T0 + 600
        assert await first.next_schedule_due() == T0 + 900  # the one-time ones are done
        # one claimed and not yet recorded: the next due time waits for it
        assert await first.claim_due_schedules(T0 + 900, next_time, owner(first)) == []
        await first.schedule_fired(cron.id, "run-1")
        [claimed] = await first.claim_due_schedules(T0 + 900, next_time, owner(first))
        assert claimed.id == cron.id and claimed.next_at == T0 + 900
        await first.delete_agent(agent.id)
        assert await first.list_schedules(agent.id) == ([], False)
        assert await first.next_schedule_due() is None
    finally:
        await first.close()
        await second.close()


async def test_claims_of_a_process_that_is_gone_are_taken_over(db_url: str) -> None:
    store = await open_store(db_url)
    now = time.time()  # runs are stored at the real time: the claims are made at it too
    try:
        agent = await store.create_agent(AgentRecord(name="orphaned"))
        unrun, run = one_time(agent.id, now - 2), one_time(agent.id, now - 1)
        await store.add_schedule(unrun, limit=10)
        await store.add_schedule(run, limit=10)
        mine = one_time(agent.id, now)
        await store.add_schedule(mine, limit=10)
        assert len(await store.claim_due_schedules(now - 1, next_time, GONE)) == 2
        await store.claim_due_schedules(now, next_time, owner(store))
        stored = await store.create_run(agent.id, metadata={"scheduled_message_id": run.id})
        other = await store.create_run(agent.id, metadata={"scheduled_message_id": "x"})
        taken = {record.id: (record.next_at, run_id)
                 for record, run_id in await store.take_orphaned_claims(owner(store))}
        assert taken == {unrun.id: (now - 2, None), run.id: (now - 1, stored.id)}
        assert other.id not in {run_id for _, run_id in taken.values()}
        assert await store.take_orphaned_claims(owner(store)) == []  # now this process's
        later = await store.take_orphaned_claims("stateloop:next-server")
        if store.dialect == "postgresql":
            assert later == []  # this store is connected: its claims stay its own
        else:  # one process holds a SQLite file: the next one takes what this one left
            assert {record.id for record, _ in later} == {unrun.id, run.id, mine.id}
    finally:
        await store.close()


async def test_on_postgresql_a_live_process_s_claims_are_left_alone(pg_database: object) -> None:
    url = pg_database()  # type: ignore[operator]
    alive, looking = await open_store(url), await open_store(url)
    try:
        assert alive.fleet is not None and looking.fleet is not None
        agent = await alive.create_agent(AgentRecord(name="busy"))
        await alive.add_schedule(one_time(agent.id, T0), limit=10)
        await alive.claim_due_schedules(T0, next_time, alive.fleet.name)
        assert await looking.take_orphaned_claims(looking.fleet.name) == []
    finally:
        await alive.close()
        await looking.close()
