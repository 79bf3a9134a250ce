"""Message batches in the ``message_batches`` and ``batch_requests`` tables of ``SqlStore``:
kept, listed, and their pending requests claimed for running, at most a bound of each batch
at a time across every process serving the database (the batch's row is locked while its
requests are claimed: ``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite's writes are serial).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    delete,
    func,
    insert,
    select,
    update,
)

from stateloop.messages import Message
from stateloop.store import rows, schema
from stateloop.store.dialect import claimed_by_gone
from stateloop.store.errors import NotFoundError
from stateloop.store.paging import keyset
from stateloop.store.projects import acting_project
from stateloop.store.records import BatchRecord, BatchRequestRecord, Page
from stateloop.store.runner import Runner

b = schema.message_batches
q = schema.batch_requests
r = schema.runs
m = schema.messages

ENDED = ("completed", "failed", "cancelled")  # a request's statuses once it is over


def _request(row: Any) -> BatchRequestRecord:
    return BatchRequestRecord(agent_id=row.agent_id, request=row.request,
                              batch_id=row.batch_id, position=row.position,
                              status=row.status, run_id=row.run_id,
                              stop_reason=row.stop_reason, error=row.error,
                              started_at=row.started_at, completed_at=row.completed_at,
                              id=row.id)


def _batch(row: Any, requests: list[BatchRequestRecord]) -> BatchRecord:
    return BatchRecord(requests=requests, status=row.status, callback_url=row.callback_url,
                       callback=row.callback, id=row.id, created_at=row.created_at,
                       updated_at=row.updated_at, completed_at=row.completed_at)


def _load(conn: Connection, batch_ids: Sequence[str]) -> list[BatchRecord]:
    """The batches of these ids that exist, in the order given, each with its requests."""
    if not batch_ids:
        return []
    rows = {row.id: row for row in conn.execute(select(b).where(b.c.id.in_(batch_ids)))}
    requests: dict[str, list[BatchRequestRecord]] = {}
    for row in conn.execute(select(q).where(q.c.batch_id.in_(batch_ids))
                            .order_by(q.c.batch_id, q.c.position)):
        requests.setdefault(row.batch_id, []).append(_request(row))
    return [_batch(rows[i], requests.get(i, [])) for i in batch_ids if i in rows]


class BatchesMixin:
    """The ``message_batches`` and ``batch_requests`` tables of ``SqlStore``."""

    _runner: Runner
    dialect: str

    async def add_batch(self, batch: BatchRecord) -> None:
        """Store a batch and its requests (numbered in order), all pending, in the acting
        project; NotFoundError naming the first request whose agent does not exist (or is
        of another project), and then nothing is stored."""
        a = schema.agents
        known = select(a.c.id).where(a.c.id.in_({request.agent_id
                                                 for request in batch.requests}))
        if (project := acting_project.get()) is not None:
            known = known.where(a.c.project == project)

        def txn(conn: Connection) -> None:
            found = set(conn.execute(known).scalars())
            for index, request in enumerate(batch.requests):
                if request.agent_id not in found:
                    raise NotFoundError(f"requests[{index}]: agent with id "
                                        f"{request.agent_id!r} not found")
            conn.execute(insert(b), [{
                "id": batch.id, "status": batch.status, "callback_url": batch.callback_url,
                "callback": None, "callback_owner": None, "created_at": batch.created_at,
                "updated_at": batch.updated_at, "completed_at": None}])
            for index, request in enumerate(batch.requests):
                request.batch_id, request.position = batch.id, index
            conn.execute(insert(q), [{
                "id": request.id, "batch_id": batch.id, "position": request.position,
                "agent_id": request.agent_id, "request": request.request,
                "status": "pending", "claimed_by": None, "run_id": None, "stop_reason": None,
                "error": None, "started_at": None, "completed_at": None}
                for request in batch.requests])

        await self._runner.write(txn)

    async def get_batch(self, batch_id: str) -> BatchRecord:
        """The batch with its requests; NotFoundError when there is none of that id."""

        def txn(conn: Connection) -> BatchRecord:
            found = _load(conn, [batch_id])
            if not found:
                raise NotFoundError(f"batch with id {batch_id!r} not found")
            return found[0]

        return await self._runner.read(txn)

    async def list_batches(self, page: Page, *, statuses: Sequence[str] = ()
                           ) -> list[BatchRecord]:
        """The batches on ``page`` (by creation time) of the acting project, of these
        statuses if any are given."""
        scope: list[ColumnElement[bool]] = [b.c.status.in_(statuses)] if statuses else []
        if (project := acting_project.get()) is not None:
            scope.append(b.c.project == project)
        stmt = select(b.c.id).where(*scope)

        def txn(conn: Connection) -> list[BatchRecord]:
            ids = list(conn.execute(keyset(conn, stmt, b, page, scope=scope)).scalars())
            return _load(conn, ids)

        return await self._runner.read(txn)

    async def claim_batch_requests(self, owner: str, *, per_batch: int,
                                   batches: int = 20) -> list[BatchRequestRecord]:
        """Pending requests of running batches (of at most ``batches`` batches with some
        pending, oldest first) marked ``running`` and claimed by ``owner``, so that no batch
        has more than ``per_batch`` running at once; each request is claimed by one caller."""
        now = time.time()

        def any_pending(conn: Connection) -> bool:
            return conn.execute(select(q.c.id).where(q.c.status == "pending").limit(1)
                                ).first() is not None

        def txn(conn: Connection) -> list[BatchRequestRecord]:
            waiting = select(q.c.batch_id).where(q.c.status == "pending")
            ids = conn.execute(select(b.c.id).where(b.c.status == "running",
                                                    b.c.id.in_(waiting))
                               .order_by(b.c.created_at, b.c.id).limit(batches)
                               .with_for_update(skip_locked=True)).scalars().all()
            claimed: list[BatchRequestRecord] = []
            for batch_id in ids:
                running = conn.execute(select(func.count()).select_from(q).where(
                    q.c.batch_id == batch_id, q.c.status == "running")).scalar_one()
                if running >= per_batch:
                    continue
                rows = conn.execute(select(q).where(q.c.batch_id == batch_id,
                                                    q.c.status == "pending")
                                    .order_by(q.c.position).limit(per_batch - running)).all()
                if rows:
                    conn.execute(update(q).where(q.c.id.in_([row.id for row in rows]))
                                 .values(status="running", claimed_by=owner, started_at=now))
                for row in rows:
                    record = _request(row)
                    record.status, record.started_at = "running", now
                    claimed.append(record)
            return claimed

        if not await self._runner.read(any_pending):  # the usual answer: no write
            return []
        return await self._runner.write(txn)

    async def batch_request_started(self, request_id: str, run_id: str) -> None:
        """Record the run a request started."""
        await self._runner.write(lambda conn: conn.execute(
            update(q).where(q.c.id == request_id).values(run_id=run_id)))

    async def finish_batch_request(self, request_id: str, status: str, *,
                                   run_id: str | None = None, stop_reason: str | None = None,
                                   error: str | None = None, owner: str | None = None
                                   ) -> BatchRecord | None:
        """Record how a running request ended; when it was its batch's last, the batch is
        ``completed`` and returned, else None. A completed batch with a ``callback_url`` is
        ``owner``'s to call back until ``batch_called_back`` records the call."""
        now = time.time()

        def txn(conn: Connection) -> BatchRecord | None:
            row = conn.execute(select(q.c.batch_id, q.c.run_id).where(q.c.id == request_id)
                               ).first()
            if row is None:  # its batch was deleted
                return None
            conn.execute(update(q).where(q.c.id == request_id, q.c.status == "running").values(
                status=status, run_id=run_id or row.run_id, stop_reason=stop_reason,
                error=error, completed_at=now, claimed_by=None))
            return _complete_if_done(conn, row.batch_id, now, owner)

        return await self._runner.write(txn)

    async def cancel_batch(self, batch_id: str) -> BatchRecord:
        """Cancel a running batch: its pending requests never start (``cancelled``); the
        running ones are for their processes to stop. The batch as it now is (one already
        over is left as it was); NotFoundError for an unknown id."""
        now = time.time()

        def txn(conn: Connection) -> BatchRecord:
            status = conn.execute(select(b.c.status).where(b.c.id == batch_id)
                                  .with_for_update()).scalar()
            if status is None:
                raise NotFoundError(f"batch with id {batch_id!r} not found")
            if status == "running":
                conn.execute(update(q).where(q.c.batch_id == batch_id,
                                             q.c.status == "pending")
                             .values(status="cancelled", stop_reason="cancelled",
                                     completed_at=now))
                conn.execute(update(b).where(b.c.id == batch_id).values(
                    status="cancelled", updated_at=now, completed_at=now))
            return _load(conn, [batch_id])[0]

        return await self._runner.write(txn)

    async def delete_batch(self, batch_id: str) -> bool:
        """Delete a batch and its requests (the runs they started stay); False when there
        is none of that id."""
        return await self._runner.write(lambda conn: bool(
            conn.execute(delete(b).where(b.c.id == batch_id)).rowcount))

    async def cancelled_batch_requests(self, request_ids: Sequence[str]) -> list[str]:
        """Which of these requests belong to batches that were cancelled."""
        if not request_ids:
            return []
        return await self._runner.read(lambda conn: list(conn.execute(
            select(q.c.id).join(b, b.c.id == q.c.batch_id).where(
                q.c.id.in_(request_ids), b.c.status == "cancelled")).scalars()))

    async def list_batch_messages(self, run_ids: Sequence[str], page: Page
                                  ) -> list[tuple[Message, str, str]]:
        """The messages on ``page`` (by when they were stored) that these runs added, their
        input included; each with its agent's and its run's id."""
        mine = (m.c.run_id.in_(run_ids), m.c.role != "system")
        stmt = select(*schema.MESSAGE_READ, m.c.agent_id, m.c.run_id).where(*mine)

        def txn(conn: Connection) -> list[tuple[Message, str, str]]:
            found = conn.execute(keyset(conn, stmt, m, page, key=(m.c.seq,), scope=mine))
            return [(rows.message_from_row(row), row.agent_id, row.run_id) for row in found]

        if not run_ids:
            return []
        return await self._runner.read(txn)

    async def batch_called_back(self, batch_id: str, callback: dict[str, Any]) -> None:
        """Record the call of the batch's ``callback_url`` (when, and its answer)."""
        await self._runner.write(lambda conn: conn.execute(
            update(b).where(b.c.id == batch_id).values(callback=callback, callback_owner=None)))

    async def take_unsent_batch_callbacks(self, owner: str) -> list[BatchRecord]:
        """Completed batches whose callback a process that is gone was to call (as for
        ``take_orphaned_batch_requests``), now ``owner``'s to call."""
        unsent = claimed_by_gone(b.c.callback_owner, owner, self.dialect)

        def txn(conn: Connection) -> list[BatchRecord]:
            ids = list(conn.execute(select(b.c.id).where(unsent)
                                    .with_for_update(skip_locked=True)).scalars())
            if ids:
                conn.execute(update(b).where(b.c.id.in_(ids)).values(callback_owner=owner))
            return _load(conn, ids)

        if await self._runner.read(lambda conn: conn.execute(
                select(b.c.id).where(unsent).limit(1)).first() is None):
            return []  # the usual answer: no write
        return await self._runner.write(txn)

    async def take_orphaned_batch_requests(self, owner: str
                                           ) -> list[tuple[BatchRequestRecord, Any]]:
        """Running requests claimed by processes that are gone (on PostgreSQL: with no
        connection left; on SQLite: any other, as one process holds the file): one that
        stored no run goes back to pending (it runs again, as it never started); one that
        did is returned with that run's record (status, stop reason, error) for its owner
        to finish."""
        orphaned = (q.c.status == "running") & claimed_by_gone(q.c.claimed_by, owner,
                                                                self.dialect)

        def any_orphaned(conn: Connection) -> bool:
            return conn.execute(select(q.c.id).where(orphaned).limit(1)).first() is not None

        if not await self._runner.read(any_orphaned):  # the usual answer: no write
            return []

        def txn(conn: Connection) -> list[tuple[BatchRequestRecord, Any]]:
            rows = conn.execute(select(q).where(orphaned)
                                .with_for_update(skip_locked=True)).all()
            taken = []
            for row in rows:
                run = _run_of(conn, row)
                if run is None:
                    conn.execute(update(q).where(q.c.id == row.id).values(
                        status="pending", claimed_by=None, started_at=None))
                    continue
                conn.execute(update(q).where(q.c.id == row.id).values(
                    claimed_by=owner, run_id=run.id))
                taken.append((_request(row), run))
            return taken

        return await self._runner.write(txn)


def _run_of(conn: Connection, row: Any) -> Any:
    """The run a request started: recorded on it, or found by the request's id in the
    metadata runs are stored with from their first write (``history.run_metadata``)."""
    if row.run_id is not None:
        return conn.execute(select(r.c.id, r.c.status, r.c.stop_reason, r.c.error)
                            .where(r.c.id == row.run_id)).first()
    runs = conn.execute(select(r.c.id, r.c.status, r.c.stop_reason, r.c.error, r.c.metadata)
                        .where(r.c.agent_id == row.agent_id,
                               r.c.created_at >= (row.started_at or 0) - 1)).all()
    return next((run for run in runs
                 if (run.metadata or {}).get("batch_request_id") == row.id), None)


def _complete_if_done(conn: Connection, batch_id: str, now: float, owner: str | None
                      ) -> BatchRecord | None:
    """Mark a running batch none of whose requests is left to run ``completed`` (its
    callback ``owner``'s to call); it, if so."""
    left = conn.execute(select(q.c.id).where(q.c.batch_id == batch_id,
                                             q.c.status.not_in(ENDED)).limit(1)).first()
    if left is not None:
        return None
    done = conn.execute(update(b).where(b.c.id == batch_id, b.c.status == "running").values(
        status="completed", updated_at=now, completed_at=now))
    if done.rowcount:
        conn.execute(update(b).where(b.c.id == batch_id, b.c.callback_url.is_not(None))
                     .values(callback_owner=owner))
    return _load(conn, [batch_id])[0] if done.rowcount else None
