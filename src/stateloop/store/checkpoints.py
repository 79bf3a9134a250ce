"""The queued write path: a step's checkpoint and a run's start and end, as one batch function
(batching.py) that commits in groups.

An agent's in-context list is stored as a list plus ``agents.in_context_after_seq``: the
agent's messages stored after that seq follow the list, so a step that only appends to the
context rewrites nothing. A run whose start, steps and end share a transaction (one that
never yields) has its row written once, with its usage and how it ended. A step's block
edits are a commit in its agents' memory repositories (memory_repo.py), in the same
transaction. Statements are compiled once (fastpath.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from stateloop.messages import Message
from stateloop.store import dialect, rows, schema
from stateloop.store.batching import BatchFn
from stateloop.store.errors import NotFoundError, StoreError
from stateloop.store.fastpath import FastStatement, InsertRows
from stateloop.store.memory_repo import Author, commit_agents, lock_for_blocks
from stateloop.store.records import APPEND, KEEP, RunRecord, StepRecord
from stateloop.surrogates import replace_lone_surrogates_in

a, m, r, s = schema.agents, schema.messages, schema.runs, schema.steps
c = schema.conversations

MAX_SEQ = select(func.coalesce(func.max(m.c.seq), 0)).scalar_subquery()

_INSERT_MESSAGES = InsertRows(m, rows.MESSAGE_COLUMNS, key="seq")
_INSERT_STEPS = InsertRows(s, rows.STEP_COLUMNS)
# A run starts before its messages are stored: the seq below them is the highest one now.
_INSERT_STARTED_RUNS = FastStatement(insert(r).values(
    {col.name: bindparam(col.name) for col in r.columns if col.name != "first_seq"}
    | {"first_seq": MAX_SEQ}), ["metadata"])
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
# A recompiled system prompt, stored in place of the one it replaces (as Letta does): one
# system message in the history, whatever the memory edits.
_REPLACE_SYSTEM = FastStatement(update(m).where(m.c.id == bindparam("id")).where(
    m.c.agent_id == bindparam("agent")).where(m.c.role == "system").values(
    text=bindparam("text"), tool_text=bindparam("tool_text"), data=bindparam("data"),
    token_count=bindparam("tokens")))
_SET_PENDING = FastStatement(update(a).where(a.c.id == bindparam("agent")).values(
    pending_approval=bindparam("pending")), ["pending"])
_STORED_CONTEXT = FastStatement(select(a.c.in_context_message_ids, a.c.in_context_after_seq)
                                .where(a.c.id == bindparam("agent")))
_APPENDED_IDS = FastStatement(select(m.c.id).where(m.c.agent_id == bindparam("agent"))
                              .where(m.c.conversation_id.is_(None))
                              .where(m.c.seq > bindparam("after"))
                              .where(m.c.seq <= bindparam("through")).order_by(m.c.seq))
# A conversation's context, stored as the agent's is (schema.conversations).
_SET_CONV_CONTEXT = FastStatement(update(c).where(c.c.id == bindparam("conv")).values(
    in_context_message_ids=bindparam("ids"), in_context_after_seq=bindparam("after"),
    updated_at=bindparam("now")), ["ids"])
_SET_CONV_PENDING = FastStatement(update(c).where(c.c.id == bindparam("conv")).values(
    pending_approval=bindparam("pending")), ["pending"])
_SET_CONV_LAST_MESSAGE = FastStatement(update(c).where(c.c.id == bindparam("conv")).values(
    last_message_at=bindparam("now")))
# A conversation's messages are marked after their insert, so the agent's own thread writes
# the rows it always wrote.
SET_CONVERSATION = FastStatement(update(m).where(m.c.seq > bindparam("low"))
                                 .where(m.c.seq <= bindparam("high"))
                                 .values(conversation_id=bindparam("conv")))
_CONV_STORED_CONTEXT = FastStatement(select(c.c.in_context_message_ids, c.c.in_context_after_seq)
                                     .where(c.c.id == bindparam("conv")))
_CONV_APPENDED_IDS = FastStatement(select(m.c.id).where(m.c.conversation_id == bindparam("conv"))
                                   .where(m.c.seq > bindparam("after"))
                                   .where(m.c.seq <= bindparam("through")).order_by(m.c.seq))
_MAX_SEQ_NOW = FastStatement(select(MAX_SEQ))
_TOP_SEQ = (1 << 31) - 1  # above every seq (an INTEGER, 32 bits on PostgreSQL)


def set_in_context(conn: Connection, agent_id: str, message_ids: Sequence[str],
                   after_seq: int | None = None, now: float | None = None) -> None:
    """Replace the agent's ordered in-context ids inside the caller's transaction. The
    messages it stores after ``after_seq`` (by default: from now on) follow them."""
    if after_seq is None:
        after_seq = _MAX_SEQ_NOW.fetch(conn, {})[0][0]
    _SET_IN_CONTEXT.require(conn, {"agent": agent_id, "ids": list(message_ids),
                                   "after": after_seq, "now": now or time.time()},
                            f"agent with id {agent_id!r} not found")


def last_run_fields(run: RunRecord) -> dict[str, Any]:
    """The agent's last-run fields (``_SET_LAST_RUN``'s parameters) for a finished run."""
    assert run.completed_at is not None
    began = run.started_at or run.created_at
    return {"agent": run.agent_id, "now": run.completed_at,
            "duration": (run.completed_at - began) * 1000, "stop_reason": run.stop_reason}


def set_last_run(conn: Connection, run: RunRecord) -> None:
    """Stamp a finished run on its agent, inside the caller's transaction."""
    _SET_LAST_RUN.execute(conn, last_run_fields(run))


def context_ids(conn: Connection, agent_id: str, stored: list[str], after_seq: int,
                through: int | None = None, conversation_id: str | None = None) -> list[str]:
    """The in-context ids of the agent's default thread (or of ``conversation_id``): the
    stored list, then its messages stored after ``after_seq`` (up to ``through``)."""
    params = {"after": after_seq, "through": through if through is not None else _TOP_SEQ}
    appended = (_APPENDED_IDS.fetch(conn, {"agent": agent_id, **params})
                if conversation_id is None else
                _CONV_APPENDED_IDS.fetch(conn, {"conv": conversation_id, **params}))
    return [*stored, *(row[0] for row in appended)] if appended else stored


@dataclass(slots=True)
class StepWrite:
    """One queued write: a step's checkpoint (rows ready to insert and the updates it makes),
    or a run's start or end."""

    agent_id: str
    message_rows: list[tuple[Any, ...]]
    step_row: tuple[Any, ...] | None
    run_usage: tuple[str, list[int]] | None  # the step's run and tokens (USAGE_COLUMNS)
    in_context: Any  # None, APPEND, or the new list of ids
    block_values: dict[str, str] | None
    pending_approval: Any
    catch_up: bool
    now: float
    run_start: dict[str, Any] | None = None  # a new run's row
    run_end: list[dict[str, Any]] | None = None  # [run's fields, agent's last-run fields]
    conversation_id: str | None = None  # the thread its messages, context and approval are of
    system: dict[str, Any] | None = None  # a stored system message's new text (_REPLACE_SYSTEM)
    author: Author | None = None  # who edited its blocks: the agent and its tools

    @classmethod
    def started(cls, run: dict[str, Any]) -> StepWrite:
        """A run's start: its row (``rows.run_values``)."""
        return cls(run["agent_id"], [], None, None, APPEND, None, KEEP, False,
                   run["created_at"], run_start=run)

    @classmethod
    def ended(cls, run: dict[str, Any], agent: dict[str, Any]) -> StepWrite:
        """A run's end: its status (``_FINISH_RUN``) and the agent's last-run fields
        (``_SET_LAST_RUN``)."""
        return cls(agent["agent"], [], None, None, APPEND, None, KEEP, False, run["now"],
                   run_end=[run, agent])

    @classmethod
    def build(cls, agent_id: str, messages: Sequence[Message], in_context: Any,
              step: StepRecord | None, run_id: str | None,
              block_values: Mapping[str, str] | None, pending_approval: Any,
              catch_up: bool, conversation_id: str | None = None,
              system: Message | None = None) -> StepWrite:
        """Encode a step's rows now, so later changes to its messages do not leak in. The
        step record rides on the last message row (``steps`` gets it only when there is
        none). A new ``in_context`` list may hold the messages themselves."""
        step_id = step_row = None
        if step is not None:
            step.agent_id = agent_id
            run_id = run_id if run_id is not None else step.run_id
            step.run_id, step_id = run_id, step.id
            if not messages:
                step_row = rows.step_row(step)
        last = len(messages) - 1
        return cls(
            agent_id, [rows.message_row(agent_id, msg, run_id, step_id,
                                        step if i == last else None)
                       for i, msg in enumerate(messages)],
            step_row, None if step is None or run_id is None else
            (run_id, rows.usage_list(step.usage)),
            in_context if in_context is None or in_context is APPEND else
            [m if isinstance(m, str) else m.id for m in in_context],
            None if block_values is None else replace_lone_surrogates_in(dict(block_values)),
            pending_approval, catch_up, time.time(), conversation_id=conversation_id,
            system=None if system is None else _system_values(agent_id, system),
            author=None if not block_values else _step_author(agent_id, messages))


def _step_author(agent_id: str, messages: Sequence[Message]) -> Author:
    """The agent, named by the tools its step called."""
    tools = dict.fromkeys(call.name for msg in messages for call in msg.tool_calls or ())
    return Author("agent", agent_id, ", ".join(tools) or None)


def _system_values(agent_id: str, message: Message) -> dict[str, Any]:
    row = dict(zip(rows.MESSAGE_COLUMNS, rows.message_row(agent_id, message, None, None),
                   strict=True))
    return {"id": row["id"], "agent": agent_id, "text": row["text"],
            "tool_text": row["tool_text"], "data": row["data"], "tokens": row["token_count"]}


def write_steps(conn: Connection, writes: list[StepWrite]) -> None:
    """Write queued steps (and runs' starts and ends) in order, each table's rows in one
    statement; context changes apply in order, and later block values and pending approvals
    replace earlier ones."""
    try:
        _write_steps(conn, writes)
    except IntegrityError as exc:
        agents = ", ".join(sorted({repr(w.agent_id) for w in writes}))
        raise StoreError(f"append_step for agent {agents} refused: {exc.orig} (unknown agent "
                         "or run, or a duplicate message id)") from exc


def _agent_of(write: StepWrite) -> str:
    return write.agent_id


# An agent's writes build on each other (its context, its runs): a chain (batching.py).
WRITE_STEPS = BatchFn(write_steps, _agent_of)


def _write_steps(conn: Connection, writes: list[StepWrite]) -> None:
    usage = _usage_by_run(writes)
    ends = [w.run_end for w in writes if w.run_end is not None]
    started = _insert_started_runs(conn, writes, usage, ends)
    message_rows = [row for w in writes for row in w.message_rows]
    before = 0  # the seq just below the batch's messages, where contexts need it
    seqs: list[int] = []  # the messages' seqs, in order, when something needs them
    # A step that only appends (the usual one) needs none: in a pipeline it then waits for
    # nothing before the commit (fastpath.py).
    need_seqs = any(w.in_context is not APPEND
                    or (w.conversation_id is not None and w.message_rows) for w in writes)
    if message_rows and not need_seqs:
        _INSERT_MESSAGES.execute(conn, message_rows, keys=False)
    elif message_rows:
        seqs = _INSERT_MESSAGES.execute(conn, message_rows)
        before = seqs[0] - 1
        at = 0
        for w in writes:  # a conversation's rows: from the seq below its first to its last
            if w.conversation_id is not None and w.message_rows:
                SET_CONVERSATION.execute(conn, {"low": seqs[at] - 1, "conv": w.conversation_id,
                                                "high": seqs[at + len(w.message_rows) - 1]})
            at += len(w.message_rows)
    elif need_seqs:
        before = _MAX_SEQ_NOW.fetch(conn, {})[0][0]
    for w in writes:
        if w.system is not None:
            _REPLACE_SYSTEM.require(conn, w.system, f"no system message {w.system['id']!r}")
    if any(w.catch_up for w in writes):
        dialect.catch_up_recall(conn)
    step_rows = [w.step_row for w in writes if w.step_row is not None]
    if step_rows:
        _INSERT_STEPS.execute(conn, step_rows)
    for run_id, (steps, *tokens) in usage.items():
        if run_id in started:
            continue  # inserted with it
        params = {f"d_{name}": count for name, count in zip(rows.USAGE_COLUMNS, tokens,
                                                            strict=True)}
        _ADD_RUN_USAGE.require(conn, {"run": run_id, "d_steps": steps, **params},
                               f"no run with id {run_id!r}")
    if any(w.in_context is not APPEND for w in writes):
        _write_contexts(conn, writes, before, seqs)
    edited = [block_id for w in writes for block_id in w.block_values or ()]
    if edited:
        lock_for_blocks(conn, edited)
    for w in writes:  # each step's edits, then its commit in the memory repositories
        if w.block_values:
            for block_id, value in w.block_values.items():
                _SET_BLOCK_VALUE.require(conn, {"block": block_id, "value": value,
                                                "now": w.now}, f"no block with id {block_id!r}")
            commit_agents(conn, block_ids=w.block_values, author=w.author, now=w.now)
    pending = {(w.agent_id, w.conversation_id): w.pending_approval
               for w in writes if w.pending_approval is not KEEP}
    for (agent_id, conv), approval in pending.items():
        if conv is None:
            _SET_PENDING.execute(conn, {"agent": agent_id, "pending": approval})
        else:
            _SET_CONV_PENDING.execute(conn, {"conv": conv, "pending": approval})
    for conv in {w.conversation_id for w in writes if w.conversation_id and w.message_rows}:
        _SET_CONV_LAST_MESSAGE.execute(conn, {"conv": conv, "now": writes[-1].now})
    for run, agent in ends:
        if run["run"] not in started:
            _FINISH_RUN.require(conn, run, f"no run with id {run['run']!r}")
        _SET_LAST_RUN.execute(conn, agent)


def _usage_by_run(writes: list[StepWrite]) -> dict[str, list[int]]:
    """Run id -> [steps, *tokens] of the writes' steps."""
    totals: dict[str, list[int]] = {}
    for w in writes:
        if w.run_usage is not None:
            run_id, tokens = w.run_usage
            found = totals.setdefault(run_id, [0] * (1 + len(tokens)))
            found[0] += 1
            for i, count in enumerate(tokens, 1):
                found[i] += count
    return totals


def _insert_started_runs(conn: Connection, writes: list[StepWrite],
                         usage: dict[str, list[int]], ends: list[list[dict[str, Any]]]
                         ) -> set[str]:
    """Insert the runs these writes start, each with the ``usage`` of its steps among them
    and its end among ``ends`` if it ended, before their messages; their ids."""
    started = {w.run_start["id"]: dict(w.run_start) for w in writes if w.run_start is not None}
    if not started:
        return set()
    for run_id, (steps, *tokens) in usage.items():
        row = started.get(run_id)
        if row is not None:
            row["step_count"] += steps
            for name, count in zip(rows.USAGE_COLUMNS, tokens, strict=True):
                row[name] += count
    for end, _ in ends:
        row = started.get(end["run"])
        if row is not None:
            row.update(status=end["status"], stop_reason=end["stop_reason"],
                       error=end["error"], completed_at=end["now"])
    try:
        _INSERT_STARTED_RUNS.execute_many(conn, list(started.values()))
    except IntegrityError as exc:
        agents = ", ".join(sorted({repr(v["agent_id"]) for v in started.values()}))
        raise NotFoundError(f"cannot start a run: agent with id {agents} not found") from exc
    return set(started)


def _write_contexts(conn: Connection, writes: list[StepWrite], before: int,
                    seqs: list[int]) -> None:
    """Apply the writes' context changes in order; ``before`` is the seq just below the
    batch's first message row, ``seqs`` the rows' seqs (rising, in write order)."""
    seq, at = before, 0
    for w in writes:
        count = len(w.message_rows)
        below = seqs[at] - 1 if count else seq
        if count:
            seq = seqs[at + count - 1]
            at += count
        if w.in_context is APPEND:
            continue
        conv = w.conversation_id
        if w.in_context is None:  # stored outside the context: the context stops before
            if not w.message_rows:
                continue
            found = (_STORED_CONTEXT.fetch(conn, {"agent": w.agent_id}) if conv is None else
                     _CONV_STORED_CONTEXT.fetch(conn, {"conv": conv}))
            if not found:
                raise NotFoundError(f"agent with id {w.agent_id!r} not found")
            stored, after = found[0]
            if isinstance(stored, str | bytes):  # SQLite hands JSON back undecoded
                stored = orjson.loads(stored)
            ids = context_ids(conn, w.agent_id, stored, after, through=below,
                              conversation_id=conv)
        else:
            ids = w.in_context
        if conv is None:
            set_in_context(conn, w.agent_id, ids, after_seq=seq)
        else:
            _SET_CONV_CONTEXT.require(conn, {"conv": conv, "ids": list(ids), "after": seq,
                                             "now": w.now}, f"no conversation with id {conv!r}")
