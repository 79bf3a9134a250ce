"""``/v1/agents/{id}/messages``: send (plain, streamed, async), approvals, cancel, history,
and stateloop's steering extension."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import JSONResponse, StreamingResponse

from ...agent import Thread
from ...approvals import Approval, ApprovalError
from ...eager import shielded
from ...errors import AgentBusyError, ConfigError, InputTooLarge
from ...memory.skills import ClientSkill
from ...messages import Message, Part, TextPart
from ...store.fleet import arrived
from ...tools.client import client_tool
from ..deps import RuntimeDep
from ..errors import CONFLICT, approval_mismatch, pending_approval_error
from ..models.content import ImageContent
from ..models.requests import (
    ApprovalCreate,
    ApprovalReturn,
    CancelAgentRunRequest,
    LettaAsyncRequest,
    LettaRequest,
    LettaStreamingRequest,
    MessageCreate,
    SteerRequest,
    TextContent,
    errors,
    streamed,
)
from ..models.responses import LettaResponse, Run
from ..pagination import Order
from ..run_errors import error_response, failed, failure_responses
from ..services import fleet
from ..services.callbacks import check_callback_url
from ..services.creation import unprocessable
from ..services.messages import Frame, history_frames
from ..services.runs import RunChannel
from ..services.runtime import Runtime
from ..services.views import DEFAULT_REQUEST_CONFIG, request_config, run_view
from ..sse import event_stream, wanted
from .agents import agent_record, live_agent

router = APIRouter(prefix="/v1/agents/{agent_id}/messages", tags=["messages"])


def _parts(content: str | list[TextContent | ImageContent]) -> list[Part]:
    """A message's content: its text, and its images as they come."""
    if isinstance(content, str):
        return [TextPart(content)]
    return [TextPart(p.text) if isinstance(p, TextContent) else p.to_part() for p in content]


def parse_input(body: LettaRequest, agent: Thread) -> tuple[list[Message], list[Approval]]:
    """Our input messages and approval decisions from Letta's ``messages``/``input``."""
    if body.input is not None and body.messages is not None:
        raise HTTPException(422, detail=[{
            "loc": ["body"], "type": "value_error",
            "msg": "Cannot specify both 'input' and 'messages'. Use one or the other."}])
    messages: list[Message] = []
    approvals: list[Approval] = []
    if body.input is not None:
        messages.append(Message("user", _parts(body.input)))
    for item in body.messages or []:
        if isinstance(item, MessageCreate):
            if item.role == "assistant":
                message = Message("assistant", [TextPart(item.text)])
            else:  # a system message from the client is input, not our system prompt
                message = Message("user", _parts(item.content))
            if item.otid is not None:  # the client's id for it, returned as given
                message.metadata["otid"] = item.otid
            messages.append(message)
        elif isinstance(item, ApprovalCreate):
            approvals += _decisions(item, agent)
        else:
            approvals += [Approval(r.tool_call_id, result=r.text, is_error=r.status == "error")
                          for r in item.tool_returns]
    if not messages and not approvals:
        raise unprocessable("messages", "nothing to send: give 'messages' or 'input'")
    return messages, approvals


def _decisions(item: ApprovalCreate, agent: Thread) -> list[Approval]:
    if item.approvals is not None:
        return [Approval(d.tool_call_id, approve=d.approve, reason=d.reason)
                if isinstance(d, ApprovalReturn)
                else Approval(d.tool_call_id, result=d.text, is_error=d.status == "error")
                for d in item.approvals]
    if item.approve is None:
        raise unprocessable("messages.approvals", "an approval needs 'approvals' or 'approve'")
    # The older form decides every pending call at once.
    pending = agent.pending_approval
    ids = pending.requested if pending is not None else []
    return [Approval(i, approve=item.approve, reason=item.reason) for i in ids]


async def start_run(runtime: Runtime, agent_id: str, body: LettaRequest, *,
                    stream_tokens: bool = False, agent: Thread | None = None) -> RunChannel:
    """Start a run for this request (in ``agent``, a thread of the agent, if given); 409
    while an approval is pending or (busy mode) a run is in flight, 400 for approvals that
    do not fit the pending request. On a fleet the request's place in the thread's queue is
    taken first, as it arrives (store/fleet.py)."""
    shared = runtime.store.fleet
    if shared is None:
        return await _start_run(runtime, agent_id, body, stream_tokens, agent)
    turn = await shared.enter(agent_id, agent.conversation_id if agent is not None else None)
    token = arrived.set(turn)
    try:
        return await _start_run(runtime, agent_id, body, stream_tokens, agent)
    finally:
        arrived.reset(token)
        if not turn.claimed:  # refused before its run began: the place goes
            await shielded(shared.leave(turn))


async def _start_run(runtime: Runtime, agent_id: str, body: LettaRequest,
                     stream_tokens: bool, agent: Thread | None) -> RunChannel:
    agent = agent or await live_agent(runtime, agent_id)
    messages, approvals = parse_input(body, agent)
    pending = agent.pending_approval
    if pending is not None and not approvals and not agent.running:
        raise pending_approval_error(agent)
    try:
        channel = await runtime.runs.start(
            agent, messages, approvals, stream_tokens=stream_tokens, max_steps=body.max_steps,
            model=body.override_model, assistant_message=body.use_assistant_message,
            tools=[client_tool(t.name, t.description, t.parameters)
                   for t in body.client_tools or ()],
            skills=[ClientSkill(s.name, s.description, s.location)
                    for s in body.client_skills or ()])
    except InputTooLarge as exc:  # nothing was stored: the agent is as it was
        raise unprocessable("input" if body.input is not None else "messages", exc) from exc
    except ConfigError as exc:  # an unknown override_model, say
        raise HTTPException(400, detail=str(exc)) from exc
    except AgentBusyError as exc:
        raise HTTPException(409, detail=str(exc)) from exc
    except ApprovalError as exc:
        if not approvals:
            raise pending_approval_error(agent) from exc
        raise approval_mismatch(pending, approvals, exc) from exc
    await remember_request(runtime, channel.run_id, body)
    return channel


async def remember_request(runtime: Runtime, run_id: str | None, body: LettaRequest) -> None:
    """Keep what shapes the run's messages as its ``request_config``, so listing them later
    (``GET /v1/runs/{id}/messages``) shows what the request asked for. Letta's defaults are
    not written: a run without one shows them (``views.run_view``)."""
    config = request_config(body)
    if run_id is None or config == DEFAULT_REQUEST_CONFIG:
        return
    run = await runtime.store.get_run(run_id)
    await runtime.store.update_run(run_id, metadata={**run.metadata, "request_config": config})


@dataclass(slots=True)
class Gathered:
    """A run's frames read to the end, as a whole response needs them."""

    messages: list[Frame] = field(default_factory=list)
    stop: Frame = field(default_factory=lambda: {"message_type": "stop_reason",
                                                 "stop_reason": "error"})
    usage: Frame = field(default_factory=lambda: {"message_type": "usage_statistics"})
    error: Frame | None = None

    def response(self) -> JSONResponse:
        # Frames are JSON already: a response of our own skips FastAPI's walk over them.
        return JSONResponse({"messages": self.messages, "stop_reason": self.stop,
                             "usage": self.usage})


async def gather(frames: AsyncIterator[Frame | None], include: list[str] | None) -> Gathered:
    """Read ``frames`` to the end: the messages ``include`` asks for, the stop reason, the
    usage and the error, if any."""
    gathered = Gathered()
    async for frame in frames:
        assert frame is not None  # no ping interval: no quiet markers
        kind = frame.get("message_type")
        if kind == "stop_reason":
            gathered.stop = frame
        elif kind == "usage_statistics":
            gathered.usage = frame
        elif kind == "error_message":
            gathered.error = frame
        elif wanted(frame, include):
            gathered.messages.append(frame)
    return gathered


async def collect(channel: RunChannel, include: list[str] | None) -> JSONResponse:
    """Letta's ``LettaResponse`` once the run ends; a failed run is an error saying why."""
    gathered = await gather(channel.follow(0), include)
    error = gathered.error.get("message") if gathered.error is not None else None
    if failed(gathered.stop["stop_reason"], error):
        assert error is not None
        return error_response(gathered.stop["stop_reason"], error, channel.run_id)
    return gathered.response()


def stream(runtime: Runtime, channel: RunChannel, body: LettaStreamingRequest
           ) -> StreamingResponse:
    ping = runtime.settings.ping_interval if body.include_pings else None
    return event_stream(channel.follow(0, ping_interval=ping),
                        include=body.include_return_message_types, pings=body.include_pings,
                        run_id=channel.run_id)


@router.post("", response_model=None,
              responses={**failure_responses(),
                         **streamed(400, 404, model=LettaResponse), **CONFLICT})
async def send_message(agent_id: str, body: LettaStreamingRequest,
                       runtime: RuntimeDep) -> JSONResponse | StreamingResponse:
    """Send messages (or approvals); the whole response, or SSE with ``streaming: true``."""
    channel = await start_run(runtime, agent_id, body,
                              stream_tokens=body.streaming and body.stream_tokens)
    if body.streaming:
        return stream(runtime, channel, body)
    return await collect(channel, body.include_return_message_types)


@router.post("/stream", responses={**streamed(400, 404), **CONFLICT})
async def send_message_streaming(agent_id: str, body: LettaStreamingRequest,
                                 runtime: RuntimeDep) -> StreamingResponse:
    """Send messages and stream the run as SSE (tokens too with ``stream_tokens``)."""
    channel = await start_run(runtime, agent_id, body, stream_tokens=body.stream_tokens)
    return stream(runtime, channel, body)


@router.post("/async", responses={**errors(400, 404), **CONFLICT}, response_model=Run)
async def send_message_async(agent_id: str, body: LettaAsyncRequest,
                             runtime: RuntimeDep) -> dict[str, Any]:
    """Start a run in the background; returns the run (poll it, or stream it by id). With
    ``callback_url``, Letta's payload is POSTed there once the run ends."""
    if body.callback_url is not None:  # refused before anything starts
        await check_callback_url(body.callback_url,
                                 private_ok=runtime.settings.callback_private_urls)
    channel = await start_run(runtime, agent_id, body)
    assert channel.run_id is not None
    if body.callback_url is not None:
        await runtime.callbacks.expect(channel, body.callback_url)
    return run_view(await runtime.store.get_run(channel.run_id))


@router.post("/cancel", responses=errors(404))
async def cancel(agent_id: str, runtime: RuntimeDep,
                 body: CancelAgentRunRequest | None = None) -> dict[str, Any]:
    """Cancel the agent's run in flight (or deny what awaits approval), in whichever
    process it runs."""
    agent = runtime.live(agent_id)
    if agent is None or not agent.running:
        holder = await fleet.held_elsewhere(runtime, agent_id)
        if holder is not None:  # in flight in another process: it is asked to cancel
            await agent_record(runtime, agent_id)  # 404 for an unknown id
            ids = await fleet.thread_runs(runtime, agent_id)
            if body is not None and body.run_ids is not None and not set(ids) & set(
                    body.run_ids):
                return {}
            await fleet.ask(runtime, holder, "cancel", agent_id)
            return dict.fromkeys(ids, "cancelled")
    if agent is None:
        await agent_record(runtime, agent_id)  # 404 for an unknown id
        return {}
    return await cancel_thread(runtime, agent, body.run_ids if body is not None else None)


async def cancel_thread(runtime: Runtime, agent: Thread, run_ids: list[str] | None = None
                        ) -> dict[str, Any]:
    """Cancel the thread's run in flight; or, as Letta does, deny the calls a paused run
    waits on (stored at once) and mark that run cancelled. The run ids cancelled."""
    active = runtime.runs.active.get(agent.conversation_id or agent.id)
    run_id = active.run_id if active is not None else None
    paused = agent.pending_approval if not agent.running else None
    if paused is not None:
        run_id = paused.run_id
    if run_ids is not None and run_id not in run_ids:
        return {}
    agent.cancel()
    if paused is not None:
        await agent.save()
        await runtime.store.update_run(paused.run_id, status="cancelled",
                                       stop_reason="cancelled")
    return {run_id: "cancelled"} if run_id else {}


@router.post("/steer", status_code=202, responses={**errors(400, 404), **CONFLICT})
async def steer(agent_id: str, body: SteerRequest, runtime: RuntimeDep) -> dict[str, Any]:
    """stateloop extension: deliver input to the run in flight (before its next model call,
    or ``mode: follow_up`` when it would stop); an idle agent starts a run."""
    agent = await live_agent(runtime, agent_id)
    active = runtime.runs.active.get(agent_id)
    holder = None if agent.running else await fleet.held_elsewhere(runtime, agent_id)
    if holder is not None:  # in flight in another process: the input goes there
        try:
            await fleet.ask(runtime, holder, "steer", agent_id, content=body.content,
                            mode=body.mode)
        except ValueError as exc:  # too long for a notice between processes
            raise unprocessable("content", exc) from exc
        ids = await fleet.thread_runs(runtime, agent_id)
        return {"status": "delivered", "run_id": ids[0] if ids else None}
    if agent.running and active is not None:
        if body.mode == "follow_up":
            agent.follow_up(body.content)
        else:
            agent.steer(body.content, body.mode)
        return {"status": "delivered", "run_id": active.run_id}
    channel = await start_run(runtime, agent_id, LettaRequest(input=body.content))
    return {"status": "started", "run_id": channel.run_id}


@router.get("", responses=errors(400, 404))
async def list_messages(
    agent_id: str, runtime: RuntimeDep,
    after: str | None = None, before: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=1000)] = 100,
    order: Order = "desc",
    include_return_message_types: Annotated[list[str] | None, Query()] = None,
    use_assistant_message: bool = True,
) -> list[dict[str, Any]]:
    """The agent's message history, a page at a time (cursors are message ids).

    As in Letta, ``order`` picks which end of the history the page comes from (``desc``: the
    newest ``limit`` messages) while the page itself reads oldest first; ``after`` is always
    newer than its id and ``before`` older, so ``after=<the last id seen>`` returns what was
    sent since."""
    live = runtime.live(agent_id)
    if live is not None:  # its record would list every message id in context
        pending = set(live.pending_approval.requested) if live.pending_approval else set()
    else:
        record = await agent_record(runtime, agent_id)
        pending = (set(record.pending_approval["requested"]) if record.pending_approval
                   else set())
    try:
        stored = await runtime.store.list_messages(agent_id, before=before, after=after,
                                                   limit=limit or 100, order=order)
    except (ValueError, LookupError) as exc:
        raise HTTPException(400, detail=f"bad cursor: {exc}") from exc
    if order == "desc":
        stored.reverse()
    frames = await history_frames(runtime.store, stored, approval_ids=pending,
                                  assistant_message=use_assistant_message)
    return [f for f in frames if wanted(f, include_return_message_types)]
