"""``/v1/steps``: every model call across runs, one step, its messages, its timing, and the
feedback a user gives on it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query

from ...store import Page
from ...store.times import to_epoch
from ..deps import RuntimeDep
from ..models.requests import Lenient, errors
from ..models.responses import Step, StepMetrics
from ..pagination import Limit, Order
from ..services.messages import to_letta
from ..services.views import step_view

router = APIRouter(prefix="/v1/steps", tags=["steps"])

Feedback = Literal["positive", "negative"]


class ModifyFeedbackRequest(Lenient):
    feedback: Feedback | None = None
    tags: list[str] | None = None


@router.get("", response_model=list[Step])
async def list_steps(runtime: RuntimeDep, before: str | None = None, after: str | None = None,
                     limit: Limit = 50, order: Order = "desc", start_date: str | None = None,
                     end_date: str | None = None, model: str | None = None,
                     agent_id: str | None = None,
                     trace_ids: Annotated[list[str] | None, Query()] = None,
                     feedback: Feedback | None = None, has_feedback: bool | None = None,
                     tags: Annotated[list[str] | None, Query()] = None
                     ) -> list[dict[str, Any]]:
    """Steps, newest first by default, filtered by agent, model (name or handle), time,
    feedback, tags and trace ids, paged in the database. A step carries a trace id when its
    run was traced with OpenTelemetry (``trace_id``: its run's)."""
    start, end = _epoch("start_date", start_date), _epoch("end_date", end_date)
    found = await runtime.store.page_steps(
        Page(after=after, before=before, limit=limit, order=order), agent_id=agent_id,
        model=model, start=start, end=end, feedback=feedback, has_feedback=has_feedback,
        tags=tags, trace_ids=trace_ids)
    return [step_view(step) for step in found]


@router.get("/{step_id}", responses=errors(404), response_model=Step)
async def retrieve_step(step_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """One step: model, tokens, status, feedback."""
    return step_view(await runtime.store.get_step(step_id))


@router.get("/{step_id}/metrics", responses=errors(404), response_model=StepMetrics)
async def retrieve_metrics_for_step(step_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """When the step started and where its time went: its model call (every try), its tool
    calls, all of it. A step stored before these were measured has its start and length
    only; what was not measured is null."""
    step = await runtime.store.get_step(step_id)
    measured = step.metadata.get("metrics") or {}
    took = step.latency_ms / 1000 if step.latency_ms is not None else None
    started = step.created_at - took if took is not None else None
    return {"id": step.id, "run_id": step.run_id, "agent_id": step.agent_id,
            "step_start_ns": measured.get("step_start_ns", _ns(started)),
            "llm_request_start_ns": measured.get("llm_request_start_ns"),
            "llm_request_ns": measured.get("llm_request_ns"),
            "tool_execution_ns": measured.get("tool_execution_ns"),
            "step_ns": measured.get("step_ns", _ns(took))}


@router.patch("/{step_id}/feedback", responses=errors(404), response_model=Step)
async def modify_feedback_for_step(step_id: str, body: ModifyFeedbackRequest,
                                   runtime: RuntimeDep) -> dict[str, Any]:
    """Mark the step's outcome 'positive' or 'negative' (or clear it); ``tags``, when not
    empty, replace its tags."""
    return step_view(await runtime.store.set_step_feedback(step_id, body.feedback, body.tags))


@router.get("/{step_id}/messages", responses=errors(404))
async def list_messages_for_step(step_id: str, runtime: RuntimeDep, before: str | None = None,
                                 after: str | None = None, limit: Limit = 100,
                                 order: Order = "asc") -> list[dict[str, Any]]:
    """The messages the step wrote, as Letta messages."""
    step = await runtime.store.get_step(step_id)
    chosen = await runtime.store.list_step_messages(
        step_id, Page(after=after, before=before, limit=limit, order=order))
    frames = [frame for message in chosen for frame in to_letta(message, run_id=step.run_id)]
    for frame in frames:
        frame["step_id"] = step.id
    return frames


def _epoch(name: str, value: str | None) -> float | None:
    try:
        return to_epoch(value)
    except (ValueError, OverflowError) as exc:
        raise HTTPException(422, detail=[{"loc": ["query", name], "msg": str(exc),
                                          "type": "value_error"}]) from exc


def _ns(seconds: float | None) -> int | None:
    return int(seconds * 1e9) if seconds is not None else None
