"""``/v1/runs``: list, retrieve, messages, steps, usage, and resuming a run's stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import StreamingResponse

from ...store import Page
from ..deps import RuntimeDep
from ..models.requests import RetrieveStreamRequest, errors, streamed
from ..models.responses import Run, Step, UsageStatistics
from ..pagination import Limit, Order, RunsLimit
from ..services.messages import Frame, history_frames
from ..services.run_frames import follow_stored, stored_end
from ..services.views import run_view, step_view, usage_view
from ..sse import event_stream, wanted

router = APIRouter(prefix="/v1/runs", tags=["runs"])

@router.get("", response_model=list[Run])
async def list_runs(runtime: RuntimeDep, agent_id: str | None = None,
                    agent_ids: Annotated[list[str] | None, Query()] = None,
                    statuses: Annotated[list[str] | None, Query()] = None,
                    active: bool = False, after: str | None = None, before: str | None = None,
                    limit: RunsLimit = 100,
                    order: Order = "desc") -> list[dict[str, Any]]:
    """Runs, newest first by default; filter by agent(s) and status."""
    ids = ([agent_id] if agent_id else []) + list(agent_ids or [])
    wanted = set(statuses or ()) | ({"created", "running"} if active else set())
    runs = await runtime.store.page_runs(
        Page(after=after, before=before, limit=limit, order=order), agent_ids=ids,
        statuses=sorted(wanted))
    return [run_view(r) for r in runs]


@router.get("/{run_id}", responses=errors(404), response_model=Run)
async def retrieve(run_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """One run: status, stop reason, timing (its time to first token too: from its start
    to its first model call's first streamed chunk)."""
    run = await runtime.store.get_run(run_id)
    view = run_view(run)
    first = await runtime.store.page_steps(Page(limit=1, order="asc"), run_id=run_id)
    measured = first[0].metadata.get("metrics") if first else None
    if measured:
        view["ttft_ns"] = max(0, measured["llm_request_start_ns"]
                              + measured["time_to_first_token_ns"]
                              - int((run.started_at or run.created_at) * 1e9))
    return view


@router.get("/{run_id}/messages", responses=errors(404))
async def messages(run_id: str, runtime: RuntimeDep, after: str | None = None,
                   before: str | None = None, limit: Limit = 100,
                   order: Order = "asc") -> list[dict[str, Any]]:
    """The messages the run added (input included), as its request asked for them
    (``use_assistant_message``, ``include_return_message_types``)."""
    run = await runtime.store.get_run(run_id)
    chosen = await runtime.store.list_run_messages(
        run, Page(after=after, before=before, limit=limit, order=order))
    config = run_view(run)["request_config"]
    frames = await history_frames(runtime.store, chosen,
                                  assistant_message=config["use_assistant_message"])
    return [f for f in frames if wanted(f, config["include_return_message_types"])]


@router.get("/{run_id}/steps", responses=errors(404), response_model=list[Step])
async def steps(run_id: str, runtime: RuntimeDep, after: str | None = None,
                before: str | None = None, limit: Limit = 100,
                order: Order = "asc") -> list[dict[str, Any]]:
    """The run's model calls, with tokens per step."""
    await runtime.store.get_run(run_id)
    found = await runtime.store.page_steps(
        Page(after=after, before=before, limit=limit, order=order), run_id=run_id)
    return [step_view(s) for s in found]


@router.get("/{run_id}/usage", responses=errors(404), response_model=UsageStatistics)
async def usage(run_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Tokens summed over the run's steps."""
    return usage_view(await runtime.store.get_run(run_id))


@router.post("/{run_id}/stream", responses=streamed(404, 409))
async def stream(run_id: str, runtime: RuntimeDep,
                 body: RetrieveStreamRequest | None = None) -> StreamingResponse:
    """The run's stream from a cursor (``starting_after``, a ``seq_id``), live until it ends.

    The process running a run serves it from memory; on PostgreSQL any other process follows
    it in the store, and replays it for an hour after it ended. On SQLite only recent runs'
    frames are kept (in memory); for an older run only its end is sent."""
    request = body or RetrieveStreamRequest()
    run = await runtime.store.get_run(run_id)
    ping = (request.poll_interval or runtime.settings.ping_interval
            if request.include_pings else None)
    channel = runtime.runs.get(run_id)
    frames: AsyncIterator[Frame | None]
    if channel is not None:
        frames = channel.follow(request.starting_after, ping_interval=ping)
    elif runtime.store.dialect == "postgresql":
        frames = follow_stored(runtime.store, run_id, request.starting_after,
                               ping_interval=ping)
    elif run.status in ("created", "running"):
        raise HTTPException(409, detail=f"run {run_id!r} is in flight in another process; "
                                        "its stream is not available here")
    else:
        return event_stream(_replay(stored_end(run)), pings=False, run_id=run_id)
    return event_stream(frames, pings=request.include_pings, run_id=run_id)


async def _replay(frames: list[Frame]) -> AsyncIterator[Frame | None]:
    for frame in frames:
        yield frame
