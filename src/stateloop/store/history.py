"""What accumulates: messages (with recall search), runs and steps. Their queued writes are
in checkpoints.py, archival passages in archive.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from types import EllipsisType, MappingProxyType
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from stateloop.messages import Message
from stateloop.store import dialect, rows, schema
from stateloop.store.access import in_acting_project
from stateloop.store.checkpoints import (
    MAX_SEQ,
    WRITE_STEPS,
    StepWrite,
    context_ids,
    last_run_fields,
    set_in_context,
    set_last_run,
)
from stateloop.store.errors import NotFoundError
from stateloop.store.fastpath import FastStatement
from stateloop.store.paging import keyset
from stateloop.store.records import (
    EVERYTHING,
    KEEP,
    RUN_STATUSES,
    MessageHit,
    Page,
    RunRecord,
    StepRecord,
)
from stateloop.store.runner import Queued, Runner
from stateloop.store.times import TimeLike, to_epoch

a, m, r, s = schema.agents, schema.messages, schema.runs, schema.steps
logger = logging.getLogger("stateloop.store")

TERMINAL_STATUSES = ("completed", "failed", "cancelled")

# What the runs of an agent (by id) started in this context carry in their metadata from their
# first write: a scheduled message's id, so whether its run was stored is known however its
# process ended. Keyed by agent: runs of other agents the run starts carry nothing.
run_metadata: ContextVar[Mapping[str, Mapping[str, Any]]] = ContextVar(
    "run_metadata", default=MappingProxyType({}))

_INSERT_RUN = FastStatement(insert(r).values(
    {col.name: bindparam(col.name) for col in r.columns if col.name != "first_seq"}
    | {"first_seq": MAX_SEQ}), ["metadata"])
_RUN = r.c.id == bindparam("run")
# ``data`` is bound already encoded (rows.message_row), so plain SQL rather than Core's JSON.
_REPLACE_MESSAGE = text("UPDATE messages SET text = :text, tool_text = :tool_text, "
                        "data = :data, token_count = NULL WHERE id = :id AND agent_id = :agent_id")
# The step records carried by run ``:run``'s messages (found through the agent's seq index).
_CARRIED_STEPS = FastStatement(
    select(m.c.step_id, m.c.step)
    .where(m.c.agent_id == select(r.c.agent_id).where(_RUN).scalar_subquery())
    .where(m.c.seq > select(r.c.first_seq).where(_RUN).scalar_subquery())
    .where(m.c.run_id == bindparam("run")).where(m.c.step.is_not(None)))


class HistoryMixin:
    """Message, run and step operations of ``SqlStore``."""

    _runner: Runner
    _unindexed: int = 0  # messages this process stored since it last caught recall up
    dialect: str = "sqlite"
    _block_writes: int = 0  # bumped by every block write through this store
    _in_flight: set[str]  # ids of the runs this store started and has not finished

    # --- messages ---

    async def append_step(self, agent_id: str, messages: Sequence[Message], *,
                          in_context_ids: Any = None, step: StepRecord | None = None,
                          run_id: str | None = None,
                          block_values: Mapping[str, str] | None = None,
                          pending_approval: Any = KEEP) -> None:
        """Checkpoint one step atomically: new messages, the step record, and (if given)
        the agent's context, block values (by block id, as memory tools left them) and
        pending approval. All of it or none of it lands.

        ``in_context_ids`` is the new ordered list of in-context ids, or ``APPEND`` when the
        messages join the end of the context, or None to leave the context as it is.
        """
        queued = self.queue_step(agent_id, messages, in_context=in_context_ids, step=step,
                                 run_id=run_id, block_values=block_values,
                                 pending_approval=pending_approval)
        await self._runner.barrier()
        error = queued.exception()
        if error is not None:
            raise error

    def queue_step(self, agent_id: str, messages: Sequence[Message], *,
                   in_context: Any = None, step: StepRecord | None = None,
                   run_id: str | None = None, block_values: Mapping[str, str] | None = None,
                   pending_approval: Any = KEEP, conversation_id: str | None = None,
                   system: Message | None = None) -> Queued:
        """``append_step`` without waiting for the commit; reads made after this call see
        the step (see ``StepWrite.build``). ``system``, a recompiled system prompt, is
        stored in place of the stored message with its id."""
        catch_up = self._unindexed + len(messages) >= dialect.RECALL_BATCH
        self._unindexed = 0 if catch_up else self._unindexed + len(messages)
        if block_values:
            self._block_writes += 1
        write = StepWrite.build(agent_id, messages, in_context, step, run_id, block_values,
                                pending_approval, catch_up, conversation_id, system)
        return self._runner.submit_batched(WRITE_STEPS, write)

    async def flush(self) -> None:
        """Wait until every queued write has committed (or failed)."""
        await self._runner.barrier()

    async def get_messages(self, ids: Sequence[str], *,
                           agent_id: str | None = None) -> list[Message]:
        """The messages with these ids (of this agent, if given), in the order given;
        unknown ids are an error."""
        wanted = list(ids)
        if not wanted:
            return []

        def txn(conn: Connection) -> list[Message]:
            found = messages_by_id(conn, wanted, agent_id)
            missing = [i for i in wanted if i not in found]
            if missing:
                raise NotFoundError(f"no messages with ids {missing[:10]}")
            return [rows.message_from_row(found[i]) for i in wanted]

        return await self._runner.read(txn)

    async def get_context(self, agent_id: str, ids: Sequence[str]) -> list[Message]:
        """The agent's in-context messages (``ids``, its record's list), in order. Ids of
        messages that were never stored (written by stateloop 0.x after a failed step) are
        dropped, and the stored list is repaired."""
        wanted = list(ids)
        found = await self._runner.read(lambda conn: messages_by_id(conn, wanted))
        return await self._context_of(agent_id, wanted, found)

    async def _context_of(self, agent_id: str, wanted: list[str], found: dict[str, Any]
                          ) -> list[Message]:
        """The messages of ``wanted`` among the rows ``found``; ids that name none are
        dropped from the stored list."""
        if len(found) < len(set(wanted)):
            missing = [i for i in wanted if i not in found]
            logger.warning("agent %s: dropping %d in-context message ids that name no stored "
                           "message: %s", agent_id, len(missing), missing[:10])
            try:
                await self._runner.write(lambda conn: _drop_missing(conn, agent_id))
            except Exception as exc:  # a read-only database: repaired at the next load
                logger.warning("agent %s: could not repair its in-context list: %s",
                               agent_id, exc)
        return [rows.message_from_row(found[i]) for i in wanted if i in found]

    async def list_messages(self, agent_id: str | None, *, before: str | None = None,
                            after: str | None = None, limit: int = 100,
                            order: str = "asc", roles: Sequence[str] | None = None,
                            own_thread: bool = False) -> list[Message]:
        """A page of an agent's stored messages (every agent's: ``None``; with ``own_thread``
        not its conversations'); ``before``/``after`` are message-id cursors."""
        if order not in ("asc", "desc"):
            raise ValueError(f"order must be 'asc' or 'desc', not {order!r}")
        stmt = select(*schema.MESSAGE_READ)
        if agent_id is not None:
            stmt = stmt.where(dialect.equals_kept_in_order(m.c.agent_id, agent_id, self.dialect))
        if (project := in_acting_project(m.c.agent_id)) is not None:
            stmt = stmt.where(project)
        if own_thread:
            stmt = stmt.where(m.c.conversation_id.is_(None))
        if before is not None:
            stmt = stmt.where(m.c.seq < _seq_of(before))
        if after is not None:
            stmt = stmt.where(m.c.seq > _seq_of(after))
        if roles is not None:
            stmt = stmt.where(m.c.role.in_(list(roles)))
        # One agent's page is ordered on its index, (agent_id, seq): ordered by seq alone,
        # PostgreSQL may walk the whole table's seq backward to reach a quiet agent.
        key = (m.c.seq,) if agent_id is None else (m.c.agent_id, m.c.seq)
        stmt = stmt.order_by(*(c.asc() if order == "asc" else c.desc() for c in key))
        stmt = stmt.limit(limit)
        return await self._runner.read(
            lambda conn: [rows.message_from_row(row) for row in conn.execute(stmt)])

    async def list_run_messages(self, run: RunRecord, page: Page = EVERYTHING
                                ) -> list[Message]:
        """The messages on ``page`` (default: all, oldest first) that a run added (its input
        included; a recompiled system prompt is not the run's), whichever process ran it;
        read in SQL on the run's index (revision 0023)."""
        mine = (m.c.run_id == run.id, m.c.seq > run.first_seq, m.c.role != "system")
        stmt = select(*schema.MESSAGE_READ).where(*mine)
        return await self._runner.read(lambda conn: [
            rows.message_from_row(row)
            for row in conn.execute(keyset(conn, stmt, m, page, key=(m.c.seq,), scope=mine))])

    async def message_origins(self, ids: Sequence[str]
                              ) -> dict[str, tuple[str | None, str | None]]:
        """The run and step that stored each of these messages (``None`` where none did)."""
        wanted = list(ids)
        # A few hundred ids a statement: SQLite caps the parameters one may take.
        stmts = [select(m.c.id, m.c.run_id, m.c.step_id).where(m.c.id.in_(wanted[i:i + 500]))
                 for i in range(0, len(wanted), 500)]
        return await self._runner.read(
            lambda conn: {row.id: (row.run_id, row.step_id)
                          for stmt in stmts for row in conn.execute(stmt)})

    async def replace_message(self, agent_id: str, message: Message) -> None:
        """Store an edited message in place of the agent's message with its id (recall
        searches the new text: the index triggers follow the row); NotFoundError when the
        agent has no message with that id."""
        row = dict(zip(rows.MESSAGE_COLUMNS, rows.message_row(agent_id, message, None, None),
                       strict=True))
        params = {name: row[name] for name in ("id", "agent_id", "text", "tool_text", "data")}

        def txn(conn: Connection) -> None:
            if conn.execute(_REPLACE_MESSAGE, params).rowcount == 0:
                raise NotFoundError(f"agent {agent_id!r} has no message with id "
                                    f"{message.id!r}")

        await self._runner.write(txn)

    async def count_messages(self, agent_id: str) -> int:
        """How many messages the agent has stored (in context or not): its count, which the
        store keeps as messages are written and deleted (revision 0026); 0 for no agent."""
        stmt = select(schema.agents.c.message_count).where(schema.agents.c.id == agent_id)
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar() or 0))

    async def search_messages(self, agent_id: str | None, query: str, *,
                              roles: Sequence[str] | None = None, limit: int = 10,
                              start_date: TimeLike | None = None,
                              end_date: TimeLike | None = None,
                              include_tool: bool = False,
                              thread: str | EllipsisType | None = ...) -> list[MessageHit]:
        """Recall: full-text search over every stored message, best match first.

        ``agent_id=None`` searches every agent. ``thread`` keeps one thread's messages: a
        conversation's id, or None for the agent's own thread (by default, every thread).
        ``roles`` defaults to user and assistant (plus tool with ``include_tool``); a bare
        date as ``end_date`` includes that whole day. A query with no words lists the most
        recent messages instead.
        """
        if roles is None:
            roles = ("user", "assistant", "tool") if include_tool else ("user", "assistant")
        start = to_epoch(start_date)
        end = to_epoch(end_date, end_of_day=True)
        stmt: Any = dialect.message_search(query, roles, include_tool, limit, self.dialect)
        if stmt is None:  # no words: the newest messages
            stmt = (select(*schema.MESSAGE_READ, m.c.agent_id, m.c.run_id)
                    .where(m.c.role.in_(list(roles))).order_by(m.c.seq.desc()).limit(limit))
        if agent_id is not None:
            stmt = stmt.where(m.c.agent_id == agent_id)
        if (project := in_acting_project(m.c.agent_id)) is not None:
            stmt = stmt.where(project)
        if start is not None:
            stmt = stmt.where(m.c.created_at >= start)
        if end is not None:
            stmt = stmt.where(m.c.created_at <= end)
        if thread is not ...:
            stmt = stmt.where(m.c.conversation_id.is_(None) if thread is None
                              else m.c.conversation_id == thread)

        if self.dialect == "sqlite":
            await self._runner.write(lambda conn: dialect.catch_up_recall(conn, include_tool))

        def txn(conn: Connection) -> list[MessageHit]:
            return [MessageHit(rows.message_from_row(row), row.agent_id, row.run_id,
                               float(getattr(row, "score", 0.0)))
                    for row in conn.execute(stmt)]

        return await self._runner.read(txn)

    # --- runs and steps ---

    async def create_run(self, agent_id: str, *, metadata: dict[str, Any] | None = None,
                         status: str = "created") -> RunRecord:
        """Record a new run for an agent."""
        _check_status(status)
        run = RunRecord(agent_id=agent_id, status=status, metadata=dict(metadata or {}))
        if status == "running":
            run.started_at = run.created_at
        try:
            await self._runner.write(lambda conn: _INSERT_RUN.execute(conn, rows.run_values(run)),
                                     raw=True)
        except IntegrityError as exc:
            raise NotFoundError(f"agent with id {agent_id!r} not found") from exc
        return run

    def queue_run(self, agent_id: str, conversation_id: str | None = None
                  ) -> tuple[RunRecord, Queued]:
        """A new 'running' run, queued like a step (it lands with the run's first step)."""
        planned = run_metadata.get()
        metadata = dict(planned.get(agent_id, {}))
        if conversation_id:
            metadata["conversation_id"] = conversation_id
        run = RunRecord(agent_id=agent_id, status="running", metadata=metadata)
        run.started_at = run.created_at
        self._in_flight.add(run.id)
        return run, self._runner.submit_batched(WRITE_STEPS, StepWrite.started(
            rows.run_values(run)))

    def requeue_run(self, run: RunRecord) -> Queued:
        """Queue the row of a run whose first write failed, as it is now."""
        return self._runner.submit_batched(WRITE_STEPS, StepWrite.started(
            rows.run_values(run)))

    def queue_finish(self, run: RunRecord, status: str, stop_reason: str | None,
                     error: str | None) -> Queued:
        """``update_run`` to a terminal status for a run this process holds, queued like a
        step (it lands with the run's last step, in the same transaction)."""
        if status not in TERMINAL_STATUSES:
            raise ValueError(f"a finished run's status is one of {TERMINAL_STATUSES}, "
                             f"not {status!r}")
        now = time.time()
        run.status, run.stop_reason, run.error, run.completed_at = (
            status, stop_reason, error, now)
        self._in_flight.discard(run.id)
        return self._runner.submit_batched(WRITE_STEPS, StepWrite.ended(
            {"run": run.id, "status": status, "stop_reason": stop_reason, "error": error,
             "now": now}, last_run_fields(run)))

    async def get_run(self, run_id: str) -> RunRecord:
        """The run with this id."""
        return await self._runner.read(lambda conn: _load_run(conn, run_id))

    async def update_run(self, run_id: str, *, status: str | None = None,
                         stop_reason: str | None = None, error: str | None = None,
                         metadata: dict[str, Any] | None = None) -> RunRecord:
        """Move a run on: 'running' stamps its start; a terminal status stamps its end and
        the agent's last-run fields, in the same transaction."""
        if status is not None:
            _check_status(status)

        def txn(conn: Connection) -> RunRecord:
            run = _load_run(conn, run_id)
            now = time.time()
            # Only the columns given are written: a run ending meanwhile in another
            # transaction (PostgreSQL) keeps its status when only metadata changes here.
            values: dict[str, Any] = {}
            if status is not None:
                values["status"] = run.status = status
                if status == "running" and run.started_at is None:
                    values["started_at"] = run.started_at = now
                if status in TERMINAL_STATUSES:
                    values["completed_at"] = run.completed_at = now
            if stop_reason is not None:
                values["stop_reason"] = run.stop_reason = stop_reason
            if error is not None:
                values["error"] = run.error = error
            if metadata is not None:
                values["metadata"] = run.metadata = metadata
            if values:
                conn.execute(update(r).where(r.c.id == run_id).values(**values))
            if status in TERMINAL_STATUSES:
                set_last_run(conn, run)
            return run

        return await self._runner.write(txn)

    async def list_runs(self, agent_id: str | None = None, *, status: str | None = None,
                        limit: int = 100) -> list[RunRecord]:
        """Runs, newest first."""
        stmt = select(r).order_by(r.c.created_at.desc(), r.c.id).limit(limit)
        if agent_id is not None:
            stmt = stmt.where(r.c.agent_id == agent_id)
        if (project := in_acting_project(r.c.agent_id)) is not None:
            stmt = stmt.where(project)
        if status is not None:
            stmt = stmt.where(r.c.status == status)
        return await self._runner.read(
            lambda conn: [rows.run_from_row(row) for row in conn.execute(stmt)])

    async def page_runs(self, page: Page, *, agent_ids: Sequence[str] | None = None,
                        statuses: Sequence[str] | None = None) -> list[RunRecord]:
        """The runs on ``page`` (on ``(created_at, id)``) of these agents (default: all)
        with one of these statuses (default: any), read in SQL."""
        stmt = select(r)
        if agent_ids:
            stmt = stmt.where(r.c.agent_id.in_(list(agent_ids)))
        if (project := in_acting_project(r.c.agent_id)) is not None:
            stmt = stmt.where(project)
        if statuses:
            stmt = stmt.where(r.c.status.in_(list(statuses)))
        return await self._runner.read(lambda conn: [
            rows.run_from_row(row) for row in conn.execute(keyset(conn, stmt, r, page))])

    async def fail_interrupted_runs(self, agent_id: str | None = None) -> list[str]:
        """Mark runs left 'created' or 'running' by a dead process as failed; their ids.
        Only when no other store has the database open (its runs would look the same:
        presence.py); runs this store has in flight stay as they are."""
        if self._runner.others_alive():
            return []
        live = r.c.status.in_(("created", "running"))
        mine = set(self._in_flight)

        def txn(conn: Connection) -> list[str]:
            query = select(r.c.id).where(live)
            if agent_id is not None:
                query = query.where(r.c.agent_id == agent_id)
            ids = [i for i in conn.execute(query).scalars() if i not in mine]
            if ids:
                conn.execute(update(r).where(r.c.id.in_(ids)).values(
                    status="failed", stop_reason="error", completed_at=time.time(),
                    error="interrupted: the process stopped before the run finished"))
            return ids

        return await self._runner.write(txn)

    async def list_steps(self, run_id: str) -> list[StepRecord]:
        """A run's steps in order."""

        def txn(conn: Connection) -> list[StepRecord]:
            run = _load_run(conn, run_id)
            carried = [rows.step_from_json(orjson.loads(data) if isinstance(data, str) else data,
                                           step_id, run.id, run.agent_id)
                       for step_id, data in _CARRIED_STEPS.fetch(conn, {"run": run_id})]
            separate = [rows.step_from_row(row)
                        for row in conn.execute(select(s).where(s.c.run_id == run_id))]
            return sorted(carried + separate, key=lambda step: (step.index, step.created_at))

        return await self._runner.read(txn)


def messages_by_id(conn: Connection, ids: list[str], agent_id: str | None = None
                    ) -> dict[str, Any]:
    """The message rows with these ids (of this agent, if given), by id."""
    stmt = select(*schema.MESSAGE_READ).where(m.c.id.in_(ids))
    if agent_id is not None:
        stmt = stmt.where(m.c.agent_id == agent_id)
    return {row.id: row for row in conn.execute(stmt)}


def _drop_missing(conn: Connection, agent_id: str) -> None:
    """Drop the ids that name no stored message from the agent's in-context list."""
    found = conn.execute(select(a.c.in_context_message_ids, a.c.in_context_after_seq)
                         .where(a.c.id == agent_id)).first()
    if found is None:
        raise NotFoundError(f"agent with id {agent_id!r} not found")
    ids = context_ids(conn, agent_id, found[0], found[1])
    stored = messages_by_id(conn, ids)
    set_in_context(conn, agent_id, [i for i in ids if i in stored])


def _seq_of(message_id: str) -> Any:
    return select(m.c.seq).where(m.c.id == message_id).scalar_subquery()


def _check_status(status: str) -> None:
    if status not in RUN_STATUSES:
        raise ValueError(f"run status must be one of {RUN_STATUSES}, not {status!r}")


def _load_run(conn: Connection, run_id: str) -> RunRecord:
    row = conn.execute(select(r).where(r.c.id == run_id)).first()
    if row is None:
        raise NotFoundError(f"no run with id {run_id!r}")
    return rows.run_from_row(row)
