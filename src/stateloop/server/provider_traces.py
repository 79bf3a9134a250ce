"""Provider traces, when the operator records them (``STATELOOP_PROVIDER_TRACES``): each
step's model request (the provider's request body, as the model adapter builds it) and its
response (the answer the stream assembled), stored in the ``provider_traces`` table after the
step, off its path, and served at ``GET /v1/steps/{step_id}/trace``.

Each side is kept whole up to ``MAX_SIDE_BYTES`` of JSON; a larger one is stored as
``{"truncated": true, "size_bytes": N, "text": <its first MAX_SIDE_BYTES characters>}``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import orjson

from ..events import RunEnd
from ..hooks import StepRecord
from ..llm.base import ModelRequest, ModelResponse
from ..store.records import ProviderTraceRecord, step_record_id

if TYPE_CHECKING:
    from ..store.sql import SqlStore

__all__ = ["MAX_SIDE_BYTES", "ProviderTraces", "bounded"]

MAX_SIDE_BYTES = 1 << 20  # 1 MiB of JSON for a request, as much for a response
logger = logging.getLogger(__name__)


def bounded(value: Any) -> dict[str, Any]:
    """``value`` as stored: whole when its JSON is at most MAX_SIDE_BYTES, else cut with a
    marker."""
    text = orjson.dumps(value, default=str)
    if len(text) <= MAX_SIDE_BYTES:
        loaded = orjson.loads(text)
        return loaded if isinstance(loaded, dict) else {"value": loaded}
    return {"truncated": True, "size_bytes": len(text),
            "text": text[:MAX_SIDE_BYTES].decode(errors="ignore")}


class ProviderTraces:
    """Records the steps of every run into ``store``; ``watch`` is its run watcher."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.writing: set[asyncio.Task[None]] = set()

    def watch(self, run_id: str, agent_id: str, model: str) -> _StepCalls:
        """The watcher of one run (``stateloop.tracing.add_watcher``)."""
        return _StepCalls(self, agent_id)

    def save(self, record: ProviderTraceRecord, model: Any, request: ModelRequest,
             response: ModelResponse) -> None:
        """Store ``record`` with the call's request and response, after the step."""
        task = asyncio.get_running_loop().create_task(
            self._write(record, model, request, response))
        self.writing.add(task)
        task.add_done_callback(self.writing.discard)

    async def _write(self, record: ProviderTraceRecord, model: Any, request: ModelRequest,
                     response: ModelResponse) -> None:
        try:
            body = getattr(model, "body", None)
            record.request_json = bounded(orjson.loads(body(request)) if body is not None
                                          else request)
            record.response_json = bounded(response)
            await self.store.add_provider_trace(record)
        except Exception:
            # A trace is a record for whoever reads it later; losing one must not fail the
            # run (its agent deleted meanwhile, say).
            logger.warning("could not record the provider trace of step %s", record.step_id,
                           exc_info=True)

    async def close(self) -> None:
        """Wait for the traces still being written."""
        if self.writing:
            await asyncio.gather(*self.writing, return_exceptions=True)


class _StepCalls:
    """One run's last model call, stored with the step it belongs to."""

    def __init__(self, traces: ProviderTraces, agent_id: str) -> None:
        self.traces, self.agent_id = traces, agent_id
        self.last: tuple[Any, ModelRequest, ModelResponse] | None = None

    def call(self, model: Any, request: ModelRequest, response: ModelResponse) -> None:
        self.last = (model, request, response)  # a retried call: the one that answered

    def step(self, record: StepRecord) -> None:
        if self.last is None or not record.step:  # no model call (calls resumed, approved)
            return
        model, request, response = self.last
        self.last = None
        self.traces.save(ProviderTraceRecord(
            step_id=step_record_id(record.run_id, record.step - 1), agent_id=self.agent_id,
            run_id=record.run_id, request_json={}, response_json={}), model, request, response)

    def end(self, end: RunEnd) -> None:
        return None
