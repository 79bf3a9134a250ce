"""``/v1/agents/{agent_id}/schedule``: messages sent to an agent at a time (``scheduled_at``,
Unix milliseconds) or on a five-field cron schedule in UTC; each fires as an async send,
queued behind the agent's other runs, its run carrying the schedule's id in its metadata."""

from __future__ import annotations

import math
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import Field

from ...cron import cron_problem, next_time
from ...storable import Count
from ...store.history import run_metadata
from ...store.records import ScheduleRecord
from ..deps import RuntimeDep
from ..limits import billed_to_agent
from ..models.requests import Lenient, LettaAsyncRequest, MessageCreate, errors
from ..models.responses import iso
from ..services.callbacks import check_callback_url
from ..services.creation import unprocessable
from ..services.runtime import Runtime
from .messages import start_run

router = APIRouter(prefix="/v1/agents/{agent_id}/schedule", tags=["agents"])

# Unix milliseconds from 2001-09-09 on: a time in seconds (10 digits) is refused, not read as
# a moment in January 1970; and up to the year 9999.
EARLIEST_MS = 1e12
LATEST_MS = 253402300799999.0

ReturnType = Literal["system_message", "user_message", "assistant_message",
                     "reasoning_message", "hidden_reasoning_message", "tool_call_message",
                     "tool_return_message", "approval_request_message",
                     "approval_response_message"]


class OneTime(Lenient):
    type: Literal["one-time"] = "one-time"
    scheduled_at: float


class Recurring(Lenient):
    type: Literal["recurring"]
    cron_expression: str


class ScheduleCreate(Lenient):
    messages: list[MessageCreate] = Field(min_length=1, max_length=100)
    schedule: OneTime | Recurring
    max_steps: Count | None = None
    include_return_message_types: list[ReturnType] | None = None
    callback_url: str | None = None


def _next_at(schedule: OneTime | Recurring, now: float) -> float:
    """When a new schedule is first due, in seconds; 422 naming the field that is wrong. A
    ``scheduled_at`` already past is due at once: it fires at the scheduler's next look."""
    if isinstance(schedule, Recurring):
        problem = cron_problem(schedule.cron_expression)
        if problem is not None:
            raise unprocessable("schedule.cron_expression", problem)
        following = next_time(schedule.model_dump(), now)
        assert following is not None
        return following
    at = schedule.scheduled_at
    if not math.isfinite(at) or not EARLIEST_MS <= at <= LATEST_MS:
        raise unprocessable("schedule.scheduled_at", "must be a time in Unix milliseconds "
                            "(13 digits for today's dates), up to the year 9999")
    return at / 1000


def _view(record: ScheduleRecord) -> dict[str, Any]:
    """Letta's ``ScheduledMessage``; ``last_run_id`` is the run its latest firing started."""
    return {"id": record.id, "agent_id": record.agent_id, "message": record.request,
            "schedule": record.schedule, "next_scheduled_time": iso(record.next_at),
            "last_run_id": record.last_run_id}


@router.post("", responses=errors(400, 404, 409))
async def create_schedule(agent_id: str, body: ScheduleCreate,
                          runtime: RuntimeDep) -> dict[str, Any]:
    """Schedule messages for the agent: once at ``scheduled_at`` or on ``cron_expression``."""
    now = runtime.scheduler.clock() if runtime.scheduler is not None else time.time()
    next_at = _next_at(body.schedule, now)
    if body.callback_url is not None:
        await check_callback_url(body.callback_url,
                                 private_ok=runtime.settings.callback_private_urls)
    request = body.model_dump(exclude={"schedule"}, exclude_none=True)
    record = ScheduleRecord(agent_id=agent_id, request=request,
                            schedule=body.schedule.model_dump(), next_at=next_at)
    try:
        await runtime.store.add_schedule(record, limit=runtime.settings.schedules_per_agent)
    except ValueError as exc:
        raise HTTPException(409, detail=str(exc)) from exc
    if runtime.scheduler is not None:
        runtime.scheduler.wake()
    return {"id": record.id, "next_scheduled_at": iso(next_at)}


@router.get("", responses=errors(404))
async def list_schedules(agent_id: str, runtime: RuntimeDep, after: str | None = None,
                         limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> dict[str, Any]:
    """The agent's scheduled messages, oldest first; fired one-time ones show no next time."""
    await runtime.store.get_agent(agent_id)  # 404 for an agent that does not exist
    records, more = await runtime.store.list_schedules(agent_id, after=after, limit=limit)
    return {"scheduled_messages": [_view(r) for r in records], "has_next_page": more}


@router.get("/{scheduled_message_id}", responses=errors(404))
async def retrieve_schedule(agent_id: str, scheduled_message_id: str,
                            runtime: RuntimeDep) -> dict[str, Any]:
    record = await runtime.store.get_schedule(agent_id, scheduled_message_id)
    if record is None:
        raise HTTPException(404, detail=f"scheduled message {scheduled_message_id!r} not "
                                        f"found for agent {agent_id!r}")
    return _view(record)


@router.delete("/{scheduled_message_id}", responses=errors(404))
async def delete_schedule(agent_id: str, scheduled_message_id: str,
                          runtime: RuntimeDep) -> dict[str, Any]:
    """Delete a scheduled message: it fires no more (a run it already started goes on)."""
    if not await runtime.store.delete_schedule(agent_id, scheduled_message_id):
        raise HTTPException(404, detail=f"scheduled message {scheduled_message_id!r} not "
                                        f"found for agent {agent_id!r}")
    return {"success": True}


async def fire(runtime: Runtime, record: ScheduleRecord) -> None:
    """Send a due schedule's messages as an async send: the run queues behind the agent's
    others, its metadata names the schedule, its tokens go to the agent's project's day, and
    its ``callback_url`` hears of its end. A project over its daily limit starts no run
    (``OverDailyTokens``: the scheduler records the firing as not started, and why)."""
    body = LettaAsyncRequest.model_validate(record.request)
    # The run is stored with the schedule's id: a process taking over the firing of one
    # that died finds it (store/schedules.py).
    token = run_metadata.set({record.agent_id: {"scheduled_message_id": record.id,
                                                "scheduled_for": iso(record.next_at)}})
    try:
        async with billed_to_agent(runtime.meter, record.agent_id):
            channel = await start_run(runtime, record.agent_id, body)
    finally:
        run_metadata.reset(token)
    if body.callback_url is not None:
        await runtime.callbacks.expect(channel, body.callback_url)
    await runtime.store.schedule_fired(record.id, channel.run_id)
