"""What accumulates: messages (with recall search), runs, steps and archival passages."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from stateloop.messages import Message
from stateloop.store import dialect, rows, schema
from stateloop.store.batching import BatchFn
from stateloop.store.errors import EmbeddingMismatchError, NotFoundError, StoreError
from stateloop.store.fastpath import FastStatement, InsertRows
from stateloop.store.records import (
    APPEND,
    KEEP,
    RUN_STATUSES,
    MessageHit,
    PassageRecord,
    RunRecord,
    StepRecord,
    VectorBatch,
)
from stateloop.store.runner import Queued, Runner
from stateloop.store.times import TimeLike, to_epoch

a, m, r, s, p = schema.agents, schema.messages, schema.runs, schema.steps, schema.passages

TERMINAL_STATUSES = ("completed", "failed", "cancelled")

_MAX_SEQ = select(func.coalesce(func.max(m.c.seq), 0)).scalar_subquery()

# The per-step write path, compiled once (see fastpath.py).
_INSERT_MESSAGES = InsertRows(m, rows.MESSAGE_COLUMNS)
_INSERT_STEPS = InsertRows(s, rows.STEP_COLUMNS)
_INSERT_RUN = FastStatement(insert(r).values(
    {col.name: bindparam(col.name) for col in r.columns if col.name != "first_seq"}
    | {"first_seq": _MAX_SEQ}), ["metadata"])
_FINISH_RUN = FastStatement(update(r).where(r.c.id == bindparam("run")).values(
    status=bindparam("status"), stop_reason=bindparam("stop_reason"),
    error=bindparam("error"), completed_at=bindparam("now")))
_ADD_RUN_USAGE = FastStatement(update(r).where(r.c.id == bindparam("run")).values(
    step_count=r.c.step_count + bindparam("d_steps"),
    **{name: getattr(r.c, name) + bindparam(f"d_{name}") for name in rows.USAGE_COLUMNS}))
_SET_LAST_RUN = FastStatement(update(a).where(a.c.id == bindparam("agent")).values(
    last_run_completion=bindparam("now"), last_run_duration_ms=bindparam("duration"),
    last_stop_reason=bindparam("stop_reason")))
_SET_IN_CONTEXT = FastStatement(update(a).where(a.c.id == bindparam("agent")).values(
    in_context_message_ids=bindparam("ids"), in_context_after_seq=bindparam("after"),
    updated_at=bindparam("now")), ["ids"])
_SET_BLOCK_VALUE = FastStatement(update(schema.blocks).where(
    schema.blocks.c.id == bindparam("block")).values(
    value=bindparam("value"), updated_at=bindparam("now")))
_SET_PENDING = FastStatement(update(a).where(a.c.id == bindparam("agent")).values(
    pending_approval=bindparam("pending")), ["pending"])
_STORED_CONTEXT = FastStatement(select(a.c.in_context_message_ids, a.c.in_context_after_seq)
                                .where(a.c.id == bindparam("agent")))
_APPENDED_IDS = FastStatement(select(m.c.id).where(m.c.agent_id == bindparam("agent"))
                              .where(m.c.seq > bindparam("after"))
                              .where(m.c.seq <= bindparam("through")).order_by(m.c.seq))
_MAX_SEQ_NOW = FastStatement(select(_MAX_SEQ))

_RUN = r.c.id == bindparam("run")
# The step records carried by run ``:run``'s messages (found through the agent's seq index).
_CARRIED_STEPS = FastStatement(
    select(m.c.step).where(m.c.agent_id == select(r.c.agent_id).where(_RUN).scalar_subquery())
    .where(m.c.seq > select(r.c.first_seq).where(_RUN).scalar_subquery())
    .where(m.c.run_id == bindparam("run")).where(m.c.step.is_not(None)))


def set_in_context(conn: Connection, agent_id: str, message_ids: Sequence[str],
                   after_seq: int | None = None, now: float | None = None) -> None:
    """Replace the agent's ordered in-context ids inside the caller's transaction. The
    messages it stores after ``after_seq`` (by default: from now on) follow them."""
    if after_seq is None:
        after_seq = _MAX_SEQ_NOW.fetch(conn, {})[0][0]
    done = _SET_IN_CONTEXT.execute(conn, {"agent": agent_id, "ids": list(message_ids),
                                          "after": after_seq, "now": now or time.time()})
    if not done:
        raise NotFoundError(f"no agent with id {agent_id!r}")


def context_ids(conn: Connection, agent_id: str, stored: list[str], after_seq: int,
                through: int | None = None) -> list[str]:
    """The agent's in-context ids: the stored list, then its messages stored after
    ``after_seq`` (up to ``through``)."""
    appended = _APPENDED_IDS.fetch(conn, {"agent": agent_id, "after": after_seq,
                                          "through": through if through is not None
                                          else 1 << 62})
    return [*stored, *(row[0] for row in appended)] if appended else stored


class HistoryMixin:
    """Message, run, step and passage operations of ``SqlStore``."""

    _runner: Runner
    _unindexed: int = 0  # messages this process stored since it last caught recall up
    _block_writes: int = 0  # bumped by every block write through this store

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
                   pending_approval: Any = KEEP) -> Queued:
        """``append_step`` without waiting for the commit; reads made after this call see
        the step. A new ``in_context`` list may hold the messages themselves. Rows are
        encoded here, so later changes do not leak in. The step record rides on the last
        message row (``steps`` gets it only when there is none)."""
        step_id = step_data = step_row = None
        if step is not None:
            step.agent_id = agent_id
            run_id = run_id if run_id is not None else step.run_id
            step.run_id, step_id = run_id, step.id
            if messages:
                step_data = rows.step_json(step)
            else:
                step_row = rows.step_row(step)
        catch_up = self._unindexed + len(messages) >= dialect.RECALL_BATCH
        self._unindexed = 0 if catch_up else self._unindexed + len(messages)
        if block_values:
            self._block_writes += 1
        last = len(messages) - 1
        write = StepWrite(
            agent_id, [rows.message_row(agent_id, msg, run_id, step_id,
                                        step_data if i == last else None)
                       for i, msg in enumerate(messages)],
            step_row, None if step is None or run_id is None else
            (run_id, list(rows.usage_values(step.usage).values())),
            in_context if in_context is None or in_context is APPEND else
            [m if isinstance(m, str) else m.id for m in in_context],
            None if block_values is None else dict(block_values), pending_approval, catch_up,
            time.time())
        return self._runner.submit_batched(WRITE_STEPS, write)

    async def flush(self) -> None:
        """Wait until every queued write has committed (or failed)."""
        await self._runner.barrier()

    async def make_durable(self) -> None:
        """Make every queued write survive a crash of this process (committed, or in the
        step log until it is)."""
        await self._runner.make_durable()

    async def get_messages(self, ids: Sequence[str]) -> list[Message]:
        """The messages with these ids, in the order given; unknown ids are an error."""
        wanted = list(ids)
        if not wanted:
            return []

        def txn(conn: Connection) -> list[Message]:
            found = {row.id: row.data for row in
                     conn.execute(select(m.c.id, m.c.data).where(m.c.id.in_(wanted)))}
            missing = [i for i in wanted if i not in found]
            if missing:
                raise NotFoundError(f"no messages with ids {missing[:10]}")
            return [Message.from_dict(found[i]) for i in wanted]

        return await self._runner.read(txn)

    async def list_messages(self, agent_id: str, *, before: str | None = None,
                            after: str | None = None, limit: int = 100,
                            order: str = "asc", roles: Sequence[str] | None = None,
                            ) -> list[Message]:
        """A page of an agent's stored messages; ``before``/``after`` are message-id cursors."""
        if order not in ("asc", "desc"):
            raise ValueError(f"order must be 'asc' or 'desc', not {order!r}")
        stmt = select(m.c.data).where(m.c.agent_id == agent_id)
        if before is not None:
            stmt = stmt.where(m.c.seq < _seq_of(before))
        if after is not None:
            stmt = stmt.where(m.c.seq > _seq_of(after))
        if roles is not None:
            stmt = stmt.where(m.c.role.in_(list(roles)))
        stmt = stmt.order_by(m.c.seq.asc() if order == "asc" else m.c.seq.desc()).limit(limit)
        return await self._runner.read(
            lambda conn: [Message.from_dict(d) for d in conn.execute(stmt).scalars()])

    async def list_run_messages(self, run: RunRecord) -> list[Message]:
        """The messages a run added (its input included; a recompiled system prompt is not
        the run's), oldest first, whichever process ran it."""
        stmt = (select(m.c.data).where(m.c.agent_id == run.agent_id)
                .where(m.c.seq > run.first_seq).where(m.c.run_id == run.id)
                .where(m.c.role != "system").order_by(m.c.seq))
        return await self._runner.read(
            lambda conn: [Message.from_dict(d) for d in conn.execute(stmt).scalars()])

    async def count_messages(self, agent_id: str) -> int:
        """How many messages the agent has ever stored (in context or not)."""
        stmt = select(func.count()).select_from(m).where(m.c.agent_id == agent_id)
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))

    async def search_messages(self, agent_id: str, query: str, *,
                              roles: Sequence[str] | None = None, limit: int = 10,
                              start_date: TimeLike | None = None,
                              end_date: TimeLike | None = None,
                              include_tool: bool = False) -> list[MessageHit]:
        """Recall: full-text search over every stored message, best match first.

        ``roles`` defaults to user and assistant (plus tool with ``include_tool``); a bare
        date as ``end_date`` includes that whole day. A query with no words lists the most
        recent messages instead.
        """
        if roles is None:
            roles = ("user", "assistant", "tool") if include_tool else ("user", "assistant")
        start = to_epoch(start_date)
        end = to_epoch(end_date, end_of_day=True)
        stmt: Any = dialect.message_search(agent_id, query, roles, include_tool, start, end,
                                          limit)
        if stmt is None:
            stmt = (select(m.c.data, m.c.agent_id, m.c.run_id)
                    .where(m.c.agent_id == agent_id).where(m.c.role.in_(list(roles)))
                    .order_by(m.c.seq.desc()).limit(limit))
            if start is not None:
                stmt = stmt.where(m.c.created_at >= start)
            if end is not None:
                stmt = stmt.where(m.c.created_at <= end)

        await self._runner.write(lambda conn: dialect.catch_up_recall(conn, include_tool))

        def txn(conn: Connection) -> list[MessageHit]:
            return [MessageHit(Message.from_dict(row.data), row.agent_id, row.run_id,
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
            raise NotFoundError(f"no agent with id {agent_id!r}") from exc
        return run

    def queue_run(self, agent_id: str) -> tuple[RunRecord, Queued]:
        """A new 'running' run, queued like a step (it lands with the run's first step)."""
        run = RunRecord(agent_id=agent_id, status="running")
        run.started_at = run.created_at
        return run, self._runner.submit_batched(INSERT_RUNS, rows.run_values(run))

    def queue_finish(self, run: RunRecord, status: str, stop_reason: str | None,
                     error: str | None) -> Queued:
        """``update_run`` to a terminal status for a run this process holds, queued like a
        step (it lands with the run's last step, in the same transaction)."""
        if status not in TERMINAL_STATUSES:
            raise ValueError(f"a finished run's status is one of {TERMINAL_STATUSES}, "
                             f"not {status!r}")
        now = time.time()
        began = run.started_at or run.created_at
        run.status, run.stop_reason, run.error, run.completed_at = (
            status, stop_reason, error, now)
        return self._runner.submit_batched(FINISH_RUNS, (
            {"run": run.id, "status": status, "stop_reason": stop_reason, "error": error,
             "now": now},
            {"agent": run.agent_id, "now": now, "duration": (now - began) * 1000,
             "stop_reason": stop_reason}))

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
            if status is not None:
                run.status = status
                if status == "running" and run.started_at is None:
                    run.started_at = now
                if status in TERMINAL_STATUSES:
                    run.completed_at = now
            if stop_reason is not None:
                run.stop_reason = stop_reason
            if error is not None:
                run.error = error
            if metadata is not None:
                run.metadata = metadata
            conn.execute(update(r).where(r.c.id == run_id).values(
                status=run.status, stop_reason=run.stop_reason, error=run.error,
                metadata=run.metadata, started_at=run.started_at,
                completed_at=run.completed_at))
            if status in TERMINAL_STATUSES:
                began = run.started_at or run.created_at
                conn.execute(update(a).where(a.c.id == run.agent_id).values(
                    last_run_completion=now, last_run_duration_ms=(now - began) * 1000,
                    last_stop_reason=run.stop_reason))
            return run

        return await self._runner.write(txn)

    async def list_runs(self, agent_id: str | None = None, *, status: str | None = None,
                        limit: int = 100) -> list[RunRecord]:
        """Runs, newest first."""
        stmt = select(r).order_by(r.c.created_at.desc(), r.c.id).limit(limit)
        if agent_id is not None:
            stmt = stmt.where(r.c.agent_id == agent_id)
        if status is not None:
            stmt = stmt.where(r.c.status == status)
        return await self._runner.read(
            lambda conn: [rows.run_from_row(row) for row in conn.execute(stmt)])

    async def fail_interrupted_runs(self, agent_id: str | None = None) -> list[str]:
        """Mark runs left 'created' or 'running' by a dead process as failed (the steps it
        logged land first); their ids."""
        await self._runner.recover()
        live = r.c.status.in_(("created", "running"))

        def txn(conn: Connection) -> list[str]:
            query = select(r.c.id).where(live)
            if agent_id is not None:
                query = query.where(r.c.agent_id == agent_id)
            ids = list(conn.execute(query).scalars())
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
            carried = [rows.step_from_json(orjson.loads(data), run.id, run.agent_id)
                       for (data,) in _CARRIED_STEPS.fetch(conn, {"run": run_id})]
            separate = [rows.step_from_row(row)
                        for row in conn.execute(select(s).where(s.c.run_id == run_id))]
            return sorted(carried + separate, key=lambda step: (step.index, step.created_at))

        return await self._runner.read(txn)

    # --- archival passages ---

    async def insert_passages(self, agent_id: str, passages: Sequence[PassageRecord],
                              ) -> list[PassageRecord]:
        """Store passages; every embedding in an archive must come from one model and size."""
        batch = list(passages)
        model_dim = _batch_model(agent_id, batch)

        def txn(conn: Connection) -> list[PassageRecord]:
            if model_dim is not None:
                stored = _archive_model(conn, agent_id)
                if stored is not None and stored != model_dim:
                    raise _mismatch(agent_id, stored, model_dim)
            if not batch:
                return batch
            values = [_passage_values(agent_id, passage) for passage in batch]
            seqs = conn.execute(insert(p).returning(p.c.seq, sort_by_parameter_order=True),
                                values).scalars().all()
            for passage, seq in zip(batch, seqs, strict=True):
                passage.seq = seq
                passage.agent_id = agent_id
            return batch

        try:
            return await self._runner.write(txn, offload=len(batch) > 256)
        except IntegrityError as exc:
            raise StoreError(f"insert_passages for agent {agent_id!r} refused: {exc.orig}") \
                from exc

    async def archive_model(self, agent_id: str) -> tuple[str, int] | None:
        """(embedding model, dimension) of the agent's archive, or None while it has none."""
        return await self._runner.read(lambda conn: _archive_model(conn, agent_id))

    async def get_passages(self, ids: Sequence[str]) -> list[PassageRecord]:
        """Passages with these ids, in the order given (unknown ids are skipped)."""
        wanted = list(ids)
        stmt = select(p).where(p.c.id.in_(wanted))

        def txn(conn: Connection) -> list[PassageRecord]:
            found = {row.id: rows.passage_from_row(row, dialect.decode_vector)
                     for row in conn.execute(stmt)}
            return [found[i] for i in wanted if i in found]

        return await self._runner.read(txn)

    async def list_passages(self, agent_id: str, *, limit: int = 100, after_seq: int = 0,
                            order: str = "asc") -> list[PassageRecord]:
        """A page of the agent's passages in insertion order (``seq`` is the cursor)."""
        stmt = select(p).where(p.c.agent_id == agent_id)
        if order == "asc":
            stmt = stmt.where(p.c.seq > after_seq).order_by(p.c.seq)
        else:
            stmt = stmt.order_by(p.c.seq.desc())
        stmt = stmt.limit(limit)
        return await self._runner.read(
            lambda conn: [rows.passage_from_row(row, dialect.decode_vector)
                          for row in conn.execute(stmt)])

    async def delete_passages(self, ids: Sequence[str]) -> int:
        """Delete passages by id; how many were deleted."""
        stmt = delete(p).where(p.c.id.in_(list(ids)))
        return await self._runner.write(lambda conn: conn.execute(stmt).rowcount)

    async def count_passages(self, agent_id: str) -> int:
        """How many passages the agent's archive holds."""
        stmt = select(func.count()).select_from(p).where(p.c.agent_id == agent_id)
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))

    async def passage_watermark(self, agent_id: str) -> int:
        """The highest passage seq of the archive (0 if empty): a cheap "anything new?"."""
        stmt = select(func.coalesce(func.max(p.c.seq), 0)).where(p.c.agent_id == agent_id)
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))

    async def load_vectors(self, agent_id: str, *, after_seq: int = 0) -> VectorBatch:
        """Embeddings (as one buffer) with ids, tags and times, for building a search index."""
        stmt = (select(p.c.seq, p.c.id, p.c.embedding, p.c.embedding_model, p.c.embedding_dim,
                       p.c.tags, p.c.created_at)
                .where(p.c.agent_id == agent_id).where(p.c.seq > after_seq)
                .where(p.c.embedding.is_not(None)).order_by(p.c.seq))

        def txn(conn: Connection) -> VectorBatch:
            found = conn.execute(stmt).all()
            model = found[0].embedding_model if found else None
            dim = found[0].embedding_dim if found else 0
            return VectorBatch(seqs=[row.seq for row in found], ids=[row.id for row in found],
                               vectors=b"".join(row.embedding for row in found), dim=dim,
                               model=model, tags=[list(row.tags) for row in found],
                               created_at=[row.created_at for row in found])

        return await self._runner.read(txn)


@dataclass(slots=True)
class StepWrite:
    """One step's checkpoint as queued: rows ready to insert and the updates it makes."""

    agent_id: str
    message_rows: list[tuple[Any, ...]]
    step_row: tuple[Any, ...] | None
    run_usage: tuple[str, list[int]] | None  # the step's run and tokens (USAGE_COLUMNS)
    in_context: Any  # None, APPEND, or the new list of ids
    block_values: dict[str, str] | None
    pending_approval: Any
    catch_up: bool
    now: float

    def encode(self) -> list[Any]:
        """As JSON for the step log."""
        return [self.agent_id, self.message_rows, self.step_row, self.run_usage,
                "append" if self.in_context is APPEND else self.in_context, self.block_values,
                [] if self.pending_approval is KEEP else [self.pending_approval],
                self.catch_up, self.now]

    @classmethod
    def decode(cls, data: list[Any]) -> StepWrite:
        write = cls(*data)
        if write.in_context == "append":
            write.in_context = APPEND
        write.pending_approval = write.pending_approval[0] if write.pending_approval else KEEP
        return write


def insert_runs(conn: Connection, values: list[dict[str, Any]]) -> None:
    """Queued run rows (``queue_run``)."""
    try:
        _INSERT_RUN.execute_many(conn, values)
    except IntegrityError as exc:
        agents = ", ".join(sorted({repr(v["agent_id"]) for v in values}))
        raise NotFoundError(f"cannot start a run: no agent with id {agents}") from exc


def finish_runs(conn: Connection, ends: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Queued run ends (``queue_finish``): the run's status and the agent's last-run fields."""
    for run, agent in ends:
        if not _FINISH_RUN.execute(conn, run):
            raise NotFoundError(f"no run with id {run['run']!r}")
        _SET_LAST_RUN.execute(conn, agent)


def write_steps(conn: Connection, writes: list[StepWrite]) -> None:
    """Write queued steps in order, each table's rows in one statement; context changes
    apply in order, and later block values and pending approvals replace earlier ones."""
    try:
        _write_steps(conn, writes)
    except IntegrityError as exc:
        agents = ", ".join(sorted({repr(w.agent_id) for w in writes}))
        raise StoreError(f"append_step for agent {agents} refused: {exc.orig} (unknown agent "
                         "or run, or a duplicate message id)") from exc


INSERT_RUNS = BatchFn("runs", insert_runs)
FINISH_RUNS = BatchFn("run_ends", finish_runs, decode=tuple)
WRITE_STEPS = BatchFn("steps", write_steps, StepWrite.encode, StepWrite.decode)


def _write_steps(conn: Connection, writes: list[StepWrite]) -> None:
    message_rows = [row for w in writes for row in w.message_rows]
    last_seq = _INSERT_MESSAGES.execute(conn, message_rows) if message_rows else None
    if any(w.catch_up for w in writes):
        dialect.catch_up_recall(conn)
    step_rows = [w.step_row for w in writes if w.step_row is not None]
    if step_rows:
        _INSERT_STEPS.execute(conn, step_rows)
    totals: dict[str, list[int]] = {}  # run id -> [steps, *tokens], once per run a batch
    for w in writes:
        if w.run_usage is not None:
            run_id, tokens = w.run_usage
            found = totals.setdefault(run_id, [0] * (1 + len(tokens)))
            found[0] += 1
            for i, count in enumerate(tokens, 1):
                found[i] += count
    for run_id, (steps, *tokens) in totals.items():
        params = {f"d_{name}": count for name, count in zip(rows.USAGE_COLUMNS, tokens,
                                                            strict=True)}
        if not _ADD_RUN_USAGE.execute(conn, {"run": run_id, "d_steps": steps, **params}):
            raise NotFoundError(f"no run with id {run_id!r}")
    if any(w.in_context is not APPEND for w in writes):
        before = (last_seq - len(message_rows) if last_seq is not None
                  else _MAX_SEQ_NOW.fetch(conn, {})[0][0])
        _write_contexts(conn, writes, before)
    blocks: dict[str, str] = {}
    for w in writes:
        blocks.update(w.block_values or {})
    for block_id, value in blocks.items():
        if not _SET_BLOCK_VALUE.execute(conn, {"block": block_id, "value": value,
                                               "now": writes[-1].now}):
            raise NotFoundError(f"no block with id {block_id!r}")
    pending = {w.agent_id: w.pending_approval for w in writes if w.pending_approval is not KEEP}
    for agent_id, value in pending.items():
        _SET_PENDING.execute(conn, {"agent": agent_id, "pending": value})


def _write_contexts(conn: Connection, writes: list[StepWrite], before: int) -> None:
    """Apply the writes' context changes in order; ``before`` is the seq just below the
    batch's first message row (the rows got consecutive seqs, in write order)."""
    seq = before
    for w in writes:
        below, seq = seq, seq + len(w.message_rows)
        if w.in_context is APPEND:
            continue
        if w.in_context is None:  # stored outside the context: the context stops before
            if not w.message_rows:
                continue
            found = _STORED_CONTEXT.fetch(conn, {"agent": w.agent_id})
            if not found:
                raise NotFoundError(f"no agent with id {w.agent_id!r}")
            stored, after = found[0]
            ids = context_ids(conn, w.agent_id, orjson.loads(stored), after, through=below)
        else:
            ids = w.in_context
        set_in_context(conn, w.agent_id, ids, after_seq=seq)


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


def _batch_model(agent_id: str, batch: list[PassageRecord]) -> tuple[str, int] | None:
    """The one (model, dim) of a batch's embeddings; a mixed batch is an error."""
    found: tuple[str, int] | None = None
    for passage in batch:
        if passage.embedding is None:
            continue
        if passage.embedding_model is None:
            raise EmbeddingMismatchError(
                f"passage {passage.id!r}: an embedding needs its embedding_model")
        dim = len(passage.embedding)
        if passage.embedding_dim is not None and passage.embedding_dim != dim:
            raise EmbeddingMismatchError(
                f"passage {passage.id!r}: embedding_dim says {passage.embedding_dim} but the "
                f"vector has {dim} values")
        passage.embedding_dim = dim
        this = (passage.embedding_model, dim)
        if found is not None and this != found:
            raise _mismatch(agent_id, found, this)
        found = this
    return found


def _archive_model(conn: Connection, agent_id: str) -> tuple[str, int] | None:
    row = conn.execute(select(p.c.embedding_model, p.c.embedding_dim)
                       .where(p.c.agent_id == agent_id).where(p.c.embedding.is_not(None))
                       .limit(1)).first()
    return None if row is None else (row.embedding_model, row.embedding_dim)


def _mismatch(agent_id: str, stored: tuple[str, int], new: tuple[str, int]
              ) -> EmbeddingMismatchError:
    return EmbeddingMismatchError(
        f"archive of agent {agent_id!r} holds embeddings from {stored[0]!r} ({stored[1]} "
        f"dims); cannot add ones from {new[0]!r} ({new[1]} dims). Re-embed the archive or "
        "use the same embedding model.")


def _passage_values(agent_id: str, passage: PassageRecord) -> dict[str, Any]:
    blob = None if passage.embedding is None else dialect.encode_vector(passage.embedding)
    return {"id": passage.id, "agent_id": agent_id, "text": passage.text, "embedding": blob,
            "embedding_model": passage.embedding_model, "embedding_dim": passage.embedding_dim,
            "tags": list(passage.tags), "metadata": passage.metadata,
            "created_at": passage.created_at}
