"""``/v1/runs``: the runs in flight, deleting a run, and a run's metrics and trace.

Registered before routes/runs.py, so ``/v1/runs/active`` is not read as a run id.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from ...store import Page
from ..deps import RuntimeDep
from ..models.requests import errors
from ..models.responses import Run, RunMetrics
from ..services.run_trace import run_trace
from ..services.views import run_view

router = APIRouter(prefix="/v1/runs", tags=["runs"])

_ACTIVE = ("created", "running")


@router.get("/active", response_model=list[Run], deprecated=True)
async def list_active_runs(runtime: RuntimeDep, agent_id: str | None = None,
                           background: bool | None = None) -> list[dict[str, Any]]:
    """Runs not yet finished, oldest first; ``background`` keeps those started in (or not
    in) background mode."""
    found = await runtime.store.page_runs(Page(), agent_ids=[agent_id] if agent_id else None,
                                          statuses=_ACTIVE)
    return [run_view(r) for r in found
            if background is None or bool(r.metadata.get("background")) == background]


@router.delete("/{run_id}", responses=errors(404, 409))
async def delete_run(run_id: str, runtime: RuntimeDep) -> None:
    """Delete a finished run's record; the messages it added stay in the agent's history.
    A run in flight is a 409: cancel it first."""
    run = await runtime.store.get_run(run_id)
    if run.status in _ACTIVE:
        raise HTTPException(409, detail=f"run {run_id!r} is {run.status}; cancel it before "
                                        "deleting it")
    await runtime.store.delete_run(run_id)


@router.get("/{run_id}/metrics", responses=errors(404), response_model=RunMetrics)
async def retrieve_metrics_for_run(run_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """When the run started, how long it took, its steps, and the ids of the tools it
    called."""
    run = await runtime.store.get_run(run_id)
    started = run.started_at or run.created_at
    names = {call.name for message in await runtime.store.list_run_messages(run)
             for call in message.tool_calls or ()}
    tools = await runtime.store.list_tools(sorted(names)) if names else []
    took = run.completed_at - started if run.completed_at is not None else None
    return {"id": run.id, "agent_id": run.agent_id, "run_start_ns": int(started * 1e9),
            "run_ns": int(took * 1e9) if took is not None else None,
            "num_steps": run.step_count, "tools_used": sorted(t.id for t in tools)}


@router.get("/{run_id}/trace", responses=errors(404), response_model=list[dict[str, Any]])
async def retrieve_trace_for_run(
        run_id: str, runtime: RuntimeDep,
        limit: Annotated[int, Query(ge=1, le=5000, description="Most spans returned")] = 1000
) -> list[dict[str, Any]]:
    """The run's spans, oldest first, as rows of ClickHouse's ``otel_traces`` table: the run,
    each step (``agent_step``), its model call (``time_to_first_token``, ``chat {model}``) and
    tool calls (``Agent._execute_tool``), rebuilt from the times its steps stored."""
    run = await runtime.store.get_run(run_id)
    steps = await runtime.store.page_steps(Page(limit=limit), run_id=run_id)
    return run_trace(run, steps, limit)
