"""Provider traces in the ``provider_traces`` table of ``SqlStore``: a step's model request
and response, one row per step, written when the operator records them and read by step id.
"""

from __future__ import annotations

from sqlalchemy import Connection, insert, select

from stateloop.store import schema
from stateloop.store.records import ProviderTraceRecord
from stateloop.store.runner import Runner

t = schema.provider_traces


class ProviderTracesMixin:
    """The ``provider_traces`` table of ``SqlStore``."""

    _runner: Runner

    async def add_provider_trace(self, record: ProviderTraceRecord) -> None:
        """Store a step's trace (its agent must exist; one per step)."""
        row = {"step_id": record.step_id, "id": record.id, "agent_id": record.agent_id,
               "run_id": record.run_id, "call_type": record.call_type,
               "request_json": record.request_json, "response_json": record.response_json,
               "created_at": record.created_at}

        def txn(conn: Connection) -> None:
            conn.execute(insert(t), [row])

        await self._runner.write(txn)

    async def get_provider_trace(self, step_id: str) -> ProviderTraceRecord | None:
        """The step's trace, or None when none was recorded."""

        def txn(conn: Connection) -> ProviderTraceRecord | None:
            row = conn.execute(select(t).where(t.c.step_id == step_id)).first()
            if row is None:
                return None
            return ProviderTraceRecord(
                step_id=row.step_id, agent_id=row.agent_id, run_id=row.run_id,
                request_json=row.request_json, response_json=row.response_json,
                call_type=row.call_type, id=row.id, created_at=row.created_at)

        return await self._runner.read(txn)
