"""Steps across runs for ``SqlStore``: listing, one step, its messages, its feedback; and
deleting a run.

A step's record rides on its last message row (``messages.step``, written by
checkpoints.py); steps that wrote no message, and those stored before revision 0006, have a
row in ``steps``. Every read here looks in both places.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, delete, or_, select, update

from stateloop.messages import Message
from stateloop.store import rows, schema
from stateloop.store.access import in_acting_project
from stateloop.store.dialect import json_array_has_any
from stateloop.store.errors import NotFoundError
from stateloop.store.paging import between, keyset
from stateloop.store.records import EVERYTHING, Page, StepRecord
from stateloop.store.runner import Runner

m, r, s = schema.messages, schema.runs, schema.steps

# A step's record rides on the row with its time (revision 0021; partial indexes hold them).
_CARRIED = select(m.c.step_id, m.c.step, m.c.run_id, m.c.agent_id).where(m.c.step_at.is_not(None))
_METADATA = rows.STEP_RECORD_FIELDS.index("metadata")


class StepsMixin:
    """Step reads and feedback, and run deletion, of ``SqlStore``."""

    _runner: Runner
    dialect: str

    async def page_steps(self, page: Page, *, agent_id: str | None = None,
                         model: str | None = None, start: float | None = None,
                         end: float | None = None, feedback: str | None = None,
                         has_feedback: bool | None = None,
                         tags: Sequence[str] | None = None,
                         run_id: str | None = None,
                         trace_ids: Sequence[str] | None = None) -> list[StepRecord]:
        """The steps on ``page`` (on ``(created_at, id)``), of this agent, run, model (its
        name or its handle), time range (inclusive), feedback, any of these tags, any of
        these trace ids (of traced runs), read in SQL: each of the two places a step is kept
        gives at most a page, and the two merge."""
        wanted = _Wanted(agent_id, model, start, end, feedback, has_feedback, tags,
                         self.dialect, run_id, trace_ids)
        carried = (m.c.step_at, m.c.step_id)
        separate = (s.c.created_at, s.c.id)
        carried_stmt = _where(select(m.c.step_id, m.c.step, m.c.run_id, m.c.agent_id,
                                     m.c.step_at).where(m.c.step_at.is_not(None)),
                              (m.c.agent_id, m.c.run_id), m.c.step_at, m.c.step[1].as_string(),
                              m.c.step, (_METADATA,), wanted)
        separate_stmt = _where(select(s), (s.c.agent_id, s.c.run_id), s.c.created_at,
                               s.c.model, s.c.metadata, (), wanted)
        carried_project, separate_project = (in_acting_project(m.c.agent_id),
                                             in_acting_project(s.c.agent_id))
        if carried_project is not None and separate_project is not None:
            carried_stmt = carried_stmt.where(carried_project)
            separate_stmt = separate_stmt.where(separate_project)

        def txn(conn: Connection) -> list[StepRecord]:
            after, before = (None if cursor is None else _position(conn, cursor)
                             for cursor in (page.after, page.before))
            found = [(row.step_at, row.step_id, _carried(row)) for row in conn.execute(
                between(carried_stmt, carried, page, after, before))]
            found += [(row.created_at, row.id, rows.step_from_row(row)) for row in conn.execute(
                between(separate_stmt, separate, page, after, before))]
            found.sort(key=lambda item: item[:2], reverse=page.order == "desc")
            return [step for *_, step in found[:page.limit]]

        return await self._runner.read(txn)

    async def get_step(self, step_id: str) -> StepRecord:
        """The step with this id."""
        return await self._runner.read(lambda conn: _load_step(conn, step_id))

    async def list_step_messages(self, step_id: str, page: Page = EVERYTHING
                                 ) -> list[Message]:
        """The messages on ``page`` (default: all, oldest first) that the step wrote (none
        for a failed model call), read in SQL on the step's index (revision 0023)."""
        mine = (m.c.step_id == step_id,)

        def txn(conn: Connection) -> list[Message]:
            _load_step(conn, step_id)
            stmt = keyset(conn, select(*schema.MESSAGE_READ).where(*mine), m, page,
                          key=(m.c.seq,), scope=mine)
            return [rows.message_from_row(row) for row in conn.execute(stmt)]

        return await self._runner.read(txn)

    async def set_step_feedback(self, step_id: str, feedback: str | None,
                                tags: list[str] | None = None) -> StepRecord:
        """Set the step's feedback ('positive', 'negative' or None); ``tags``, when given
        and not empty, replace its tags (as Letta does). Kept in the step's metadata."""

        def txn(conn: Connection) -> StepRecord:
            step = _load_step(conn, step_id)
            step.metadata = {**step.metadata, "feedback": feedback}
            if tags:
                step.metadata["tags"] = list(tags)
            row = conn.execute(_CARRIED.where(m.c.step_id == step_id)).first()
            if row is None:
                conn.execute(update(s).where(s.c.id == step_id).values(metadata=step.metadata))
            else:
                record = list(row.step)
                record[_METADATA] = step.metadata
                conn.execute(update(m).where(m.c.step_id == step_id)
                             .where(m.c.step_at.is_not(None)).values(step=record))
            return step

        return await self._runner.write(txn)

    async def delete_run(self, run_id: str) -> None:
        """Delete a run's record (and its separate step rows). Its messages stay in the
        agent's history, as Letta keeps them."""

        def txn(conn: Connection) -> None:
            if conn.execute(delete(r).where(r.c.id == run_id)).rowcount == 0:
                raise NotFoundError(f"no run with id {run_id!r}")
            conn.execute(delete(s).where(s.c.run_id == run_id))

        await self._runner.write(txn)


def _carried(row: Any) -> StepRecord:
    return rows.step_from_json(row.step, row.step_id, row.run_id, row.agent_id)


@dataclass(frozen=True, slots=True)
class _Wanted:
    """Which steps a list keeps (None: any)."""

    agent_id: str | None
    model: str | None
    start: float | None
    end: float | None
    feedback: str | None
    has_feedback: bool | None
    tags: Sequence[str] | None
    dialect: str
    run_id: str | None = None
    trace_ids: Sequence[str] | None = None


def _where(stmt: Select[Any], owners: tuple[Any, Any], at: Any, model_of: Any, metadata: Any,
           path: tuple[int, ...], wanted: _Wanted) -> Select[Any]:
    """``stmt`` over one place steps are kept, narrowed to the ``wanted`` steps: its agent
    and run columns, time, model and metadata (a JSON document; ``path`` leads to it)."""
    agent, run = owners
    if wanted.run_id is not None:
        stmt = stmt.where(run == wanted.run_id)
    agent_id, model, feedback, has_feedback, tags = (
        wanted.agent_id, wanted.model, wanted.feedback, wanted.has_feedback, wanted.tags)
    given = metadata[(*path, "feedback")].as_string()
    if agent_id is not None:
        stmt = stmt.where(agent == agent_id)
    if model is not None:
        stmt = stmt.where(or_(model_of == model,
                              model_of.endswith(f"/{model}", autoescape=True)))
    if wanted.start is not None:
        stmt = stmt.where(at >= wanted.start)
    if wanted.end is not None:
        stmt = stmt.where(at <= wanted.end)
    if feedback is not None:
        stmt = stmt.where(given == feedback)
    if has_feedback is not None:
        stmt = stmt.where(given.is_not(None) if has_feedback else given.is_(None))
    if tags:
        stmt = stmt.where(json_array_has_any(metadata, (*path, "tags"), tags, wanted.dialect))
    if wanted.trace_ids is not None:
        stmt = stmt.where(metadata[(*path, "trace_id")].as_string().in_(list(wanted.trace_ids)))
    return stmt


def _position(conn: Connection, step_id: str) -> tuple[float, str] | None:
    """Where the step with this id stands in a list of steps: ``(created_at, id)``."""
    row = conn.execute(select(m.c.step_at, m.c.step_id).where(m.c.step_id == step_id)
                       .where(m.c.step_at.is_not(None))).first()
    if row is None:
        row = conn.execute(select(s.c.created_at, s.c.id).where(s.c.id == step_id)).first()
    return None if row is None else (row[0], row[1])


def _load_step(conn: Connection, step_id: str) -> StepRecord:
    row = conn.execute(_CARRIED.where(m.c.step_id == step_id)).first()
    if row is not None:
        return _carried(row)
    separate = conn.execute(select(s).where(s.c.id == step_id)).first()
    if separate is None:
        raise NotFoundError(f"no step with id {step_id!r}")
    return rows.step_from_row(separate)
