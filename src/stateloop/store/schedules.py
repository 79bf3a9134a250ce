"""Scheduled messages in the ``scheduled_messages`` table of ``SqlStore``: kept, listed, and
claimed when due, each due row by one process only (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL; SQLite's writes are serial) in the transaction that moves it to its next time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    Connection,
    delete,
    func,
    insert,
    select,
    update,
)

from stateloop.store import schema
from stateloop.store.dialect import claimed_by_gone
from stateloop.store.errors import NotFoundError
from stateloop.store.records import ScheduleRecord
from stateloop.store.runner import Runner

t = schema.scheduled_messages
r = schema.runs

# When a schedule is next due after firing at a time (None: never again).
Following = Callable[[dict[str, Any], float], "float | None"]


def _record(row: Any) -> ScheduleRecord:
    return ScheduleRecord(agent_id=row.agent_id, request=row.request, schedule=row.schedule,
                          next_at=row.next_at, fired_count=row.fired_count,
                          last_fired_at=row.last_fired_at, last_run_id=row.last_run_id,
                          id=row.id, created_at=row.created_at)


class SchedulesMixin:
    """The ``scheduled_messages`` table of ``SqlStore``."""

    _runner: Runner
    dialect: str

    async def add_schedule(self, record: ScheduleRecord, *, limit: int) -> None:
        """Store a schedule; ValueError when its agent already has ``limit`` pending ones
        (counted in the same transaction), NotFoundError when the agent does not exist."""

        def txn(conn: Connection) -> None:
            if conn.execute(select(schema.agents.c.id)
                            .where(schema.agents.c.id == record.agent_id)).first() is None:
                raise NotFoundError(f"agent with id {record.agent_id!r} not found")
            pending = conn.execute(select(func.count()).select_from(t).where(
                t.c.agent_id == record.agent_id, t.c.next_at.is_not(None))).scalar_one()
            if pending >= limit:
                raise ValueError(f"the agent has {pending} pending scheduled messages, the "
                                 f"most it may have")
            conn.execute(insert(t), [{
                "id": record.id, "agent_id": record.agent_id, "request": record.request,
                "schedule": record.schedule, "next_at": record.next_at,
                "fired_count": record.fired_count, "last_fired_at": record.last_fired_at,
                "last_run_id": record.last_run_id, "created_at": record.created_at}])

        await self._runner.write(txn)

    async def get_schedule(self, agent_id: str, schedule_id: str) -> ScheduleRecord | None:
        def txn(conn: Connection) -> ScheduleRecord | None:
            row = conn.execute(select(t).where(t.c.id == schedule_id,
                                               t.c.agent_id == agent_id)).first()
            return None if row is None else _record(row)

        return await self._runner.read(txn)

    async def list_schedules(self, agent_id: str, *, after: str | None = None,
                             limit: int = 50) -> tuple[list[ScheduleRecord], bool]:
        """The agent's schedules oldest first, after the one with id ``after``; and whether
        more follow."""

        def txn(conn: Connection) -> tuple[list[ScheduleRecord], bool]:
            query = select(t).where(t.c.agent_id == agent_id)
            if after is not None:
                mark = conn.execute(select(t.c.created_at, t.c.id).where(
                    t.c.id == after, t.c.agent_id == agent_id)).first()
                if mark is not None:
                    query = query.where((t.c.created_at > mark.created_at) | (
                        (t.c.created_at == mark.created_at) & (t.c.id > mark.id)))
            rows = conn.execute(query.order_by(t.c.created_at, t.c.id).limit(limit + 1)).all()
            return [_record(row) for row in rows[:limit]], len(rows) > limit

        return await self._runner.read(txn)

    async def delete_schedule(self, agent_id: str, schedule_id: str) -> bool:
        """Delete a schedule; False when the agent has none of that id."""

        def txn(conn: Connection) -> bool:
            done = conn.execute(delete(t).where(t.c.id == schedule_id, t.c.agent_id == agent_id))
            return bool(done.rowcount)

        return await self._runner.write(txn)

    async def next_schedule_due(self) -> float | None:
        """When the earliest pending schedule is due (an index lookup), None without any."""
        return await self._runner.read(
            lambda conn: conn.execute(select(func.min(t.c.next_at))).scalar_one())

    async def claim_due_schedules(self, now: float, following: Following, owner: str, *,
                                  limit: int = 100) -> list[ScheduleRecord]:
        """The schedules due at ``now`` (at most ``limit``), each moved to when it is next
        due (``following(schedule, now)``, None for never) and marked claimed by ``owner``
        in this same transaction: each due time is claimed by one caller, however many
        processes ask at once. The records returned keep the due time they were claimed at
        in ``next_at``."""

        def txn(conn: Connection) -> list[ScheduleRecord]:
            rows = conn.execute(select(t).where(t.c.next_at <= now, t.c.claimed_by.is_(None))
                                .order_by(t.c.next_at, t.c.id).limit(limit)
                                .with_for_update(skip_locked=True)).all()
            claimed = []
            for row in rows:
                conn.execute(update(t).where(t.c.id == row.id).values(
                    next_at=following(row.schedule, now), fired_count=row.fired_count + 1,
                    last_fired_at=now, claimed_by=owner, claimed_for=row.next_at))
                claimed.append(_record(row))
            return claimed

        return await self._runner.write(txn)

    async def schedule_fired(self, schedule_id: str, run_id: str | None) -> None:
        """Record the run a schedule's latest firing started (None: it started none, the
        agent refusing it); the firing's claim ends."""
        await self._runner.write(lambda conn: conn.execute(
            update(t).where(t.c.id == schedule_id).values(last_run_id=run_id,
                                                          claimed_by=None)))

    async def take_orphaned_claims(self, owner: str) -> list[tuple[ScheduleRecord, str | None]]:
        """Firings claimed by processes that are gone (on PostgreSQL: with no connection
        left; on SQLite: any other, as one process holds the file), now claimed by
        ``owner``; each with the run stored for it, if one was (its metadata names the
        schedule from its first write: ``history.run_metadata``). The records keep the due time
        of the firing in ``next_at``."""
        orphaned = claimed_by_gone(t.c.claimed_by, owner, self.dialect)

        def any_orphaned(conn: Connection) -> bool:
            return conn.execute(select(t.c.id).where(orphaned).limit(1)).first() is not None

        if not await self._runner.read(any_orphaned):  # the usual answer: no write
            return []

        def txn(conn: Connection) -> list[tuple[ScheduleRecord, str | None]]:
            rows = conn.execute(select(t).where(orphaned)
                                .with_for_update(skip_locked=True)).all()
            taken = []
            for row in rows:
                conn.execute(update(t).where(t.c.id == row.id).values(claimed_by=owner))
                record = _record(row)
                record.next_at = row.claimed_for
                runs = conn.execute(select(r.c.id, r.c.metadata).where(
                    r.c.agent_id == row.agent_id, r.c.created_at >= row.last_fired_at)).all()
                # A later firing is claimed only once this one's claim ends: a run of the
                # schedule's since this claim is this firing's.
                stored = [run.id for run in runs
                          if (run.metadata or {}).get("scheduled_message_id") == row.id]
                taken.append((record, stored[0] if stored else None))
            return taken

        return await self._runner.write(txn)
