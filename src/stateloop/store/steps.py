"""Steps across runs for ``SqlStore``: listing, one step, its messages, its feedback; and
deleting a run.

A step's record rides on its last message row (``messages.step``, written by
checkpoints.py); steps that wrote no message, and those stored before revision 0006, have a
row in ``steps``. Every read here looks in both places.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, select, update

from stateloop.messages import Message
from stateloop.store import rows, schema
from stateloop.store.errors import NotFoundError
from stateloop.store.records import StepRecord
from stateloop.store.runner import Runner

m, r, s = schema.messages, schema.runs, schema.steps

_CARRIED = select(m.c.step_id, m.c.step, m.c.run_id, m.c.agent_id).where(m.c.step.is_not(None))
_METADATA = rows.STEP_RECORD_FIELDS.index("metadata")


class StepsMixin:
    """Step reads and feedback, and run deletion, of ``SqlStore``."""

    _runner: Runner

    async def list_all_steps(self, agent_id: str | None = None) -> list[StepRecord]:
        """Every step (of this agent), oldest first."""
        carried, separate = _CARRIED, select(s)
        if agent_id is not None:
            carried, separate = (carried.where(m.c.agent_id == agent_id),
                                 separate.where(s.c.agent_id == agent_id))

        def txn(conn: Connection) -> list[StepRecord]:
            found = [_carried(row) for row in conn.execute(carried)]
            found += [rows.step_from_row(row) for row in conn.execute(separate)]
            return sorted(found, key=lambda step: (step.created_at, step.index, step.id))

        return await self._runner.read(txn)

    async def get_step(self, step_id: str) -> StepRecord:
        """The step with this id."""
        return await self._runner.read(lambda conn: _load_step(conn, step_id))

    async def list_step_messages(self, step_id: str) -> list[Message]:
        """The messages the step wrote, oldest first (none for a failed model call)."""

        def txn(conn: Connection) -> list[Message]:
            _load_step(conn, step_id)
            stmt = select(*schema.MESSAGE_READ).where(m.c.step_id == step_id).order_by(m.c.seq)
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
                             .where(m.c.step.is_not(None)).values(step=record))
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


def _load_step(conn: Connection, step_id: str) -> StepRecord:
    row = conn.execute(_CARRIED.where(m.c.step_id == step_id)).first()
    if row is not None:
        return _carried(row)
    separate = conn.execute(select(s).where(s.c.id == step_id)).first()
    if separate is None:
        raise NotFoundError(f"no step with id {step_id!r}")
    return rows.step_from_row(separate)
