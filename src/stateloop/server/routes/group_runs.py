"""Sending to a group: ``POST /v1/groups/{id}/messages`` (+ ``/stream``), which older Letta
clients call (Letta 0.16.8's document no longer lists them; an agent's own messages route
reaches only that agent, as there). Each member's turn is a real run of that member; every
frame says which agent produced it (``sender_id``, ``name``). As those Letta versions did, a
sleeptime group's messages go to its main agent, whose turns drive the memory agent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse, StreamingResponse

from ...agent import Agent
from ...errors import ConfigError
from ...groups import Group, GroupEvent
from ...groups.base import GOOD_STOPS
from ...messages import Message, TextPart
from ..deps import RuntimeDep
from ..models.requests import LettaStreamingRequest, MessageCreate, TextContent, streamed
from ..models.responses import LettaResponse
from ..run_errors import error_response, failure_responses
from ..services.creation import unprocessable
from ..services.messages import Frame, StreamConverter, usage_frame
from ..services.runtime import Runtime
from ..sse import event_stream
from .agents import live_agent
from .messages import gather, send_message, send_message_streaming

router = APIRouter(prefix="/v1/groups/{group_id}/messages", tags=["groups"])

_END_FRAMES = frozenset({"stop_reason", "usage_statistics", "error_message"})


def _input(body: LettaStreamingRequest) -> list[Message]:
    """The messages sent to the group (approvals belong to one agent's run, not a group's)."""
    if body.input is not None and body.messages is not None:
        raise unprocessable("messages", "Cannot specify both 'input' and 'messages'.")
    messages = []
    if body.input is not None:
        text = body.input if isinstance(body.input, str) else "".join(
            p.text for p in body.input if isinstance(p, TextContent))
        messages.append(Message("user", [TextPart(text)]))
    for item in body.messages or []:
        if not isinstance(item, MessageCreate):
            raise unprocessable("messages", "a group takes messages, not approvals or tool "
                                "returns; send those to the agent that asked")
        messages.append(Message("user", [TextPart(item.text)]))
    if not messages:
        raise unprocessable("messages", "nothing to send: give 'messages' or 'input'")
    return messages


async def _group(runtime: Runtime, group_id: str) -> Group:
    async def load(agent_id: str) -> Agent:
        return await live_agent(runtime, agent_id)

    try:
        return await Group.aload(group_id, store=runtime.store, load_agent=load)
    except ConfigError as exc:  # a manager type that does not run here
        raise HTTPException(400, detail=str(exc)) from exc


async def _sleeptime_main(runtime: Runtime, group_id: str) -> str | None:
    """A sleeptime group's main agent, which its messages go to."""
    record = await runtime.store.get_group(group_id)
    return record.manager_agent_id if record.manager_type == "sleeptime" else None


async def _frames(group: Group, input: list[Message], *, stream_tokens: bool,
                  assistant_message: bool) -> AsyncIterator[Frame]:
    """Every member's frames tagged with it, then the group's stop reason and usage."""
    converters: dict[str, StreamConverter] = {}
    usage: dict[str, Any] = {"message_type": "usage_statistics", "completion_tokens": 0,
                             "prompt_tokens": 0, "total_tokens": 0, "step_count": 0,
                             "run_ids": []}
    event: GroupEvent
    async for event in group.stream(input):
        converter = converters.setdefault(event.agent_id, StreamConverter(
            stream_tokens=stream_tokens, approval_names=set(),
            assistant_message=assistant_message))
        if event.type == "run_end":
            counts = usage_frame(event.event)  # type: ignore[arg-type]
            for key in ("completion_tokens", "prompt_tokens", "total_tokens", "step_count"):
                usage[key] += counts[key] or 0
            usage["run_ids"] += counts["run_ids"]
        for frame in converter.feed(event.event):
            if frame.get("message_type") in _END_FRAMES:
                continue
            frame["sender_id"], frame["name"] = event.agent_id, event.agent_name
            yield frame
    result = group.last_result
    assert result is not None
    if result.stop_reason == "error":  # the member run that failed, if one did
        last = result.runs[-1] if result.runs else None
        if last is not None and last.stop_reason not in GOOD_STOPS:
            yield {"message_type": "error_message", "run_id": last.run_id,
                   "error_type": last.stop_reason, "message": last.error or result.error,
                   "detail": None}
        else:
            yield {"message_type": "error_message", "run_id": None, "error_type": "error",
                   "message": result.error, "detail": None}
    yield {"message_type": "stop_reason",
           "stop_reason": "error" if result.stop_reason == "error" else "end_turn"}
    yield usage


@router.post("", response_model=None,
             responses={**failure_responses(),
                        **streamed(400, 404, 409, model=LettaResponse)})
async def send_group_message(group_id: str, body: LettaStreamingRequest,
                             runtime: RuntimeDep) -> JSONResponse | StreamingResponse:
    """Send messages to the group; the whole response, or SSE with ``streaming: true``."""
    main = await _sleeptime_main(runtime, group_id)
    if main is not None:
        return await send_message(main, body, runtime)
    group, input = await _group(runtime, group_id), _input(body)
    frames = _frames(group, input, stream_tokens=body.streaming and body.stream_tokens,
                     assistant_message=body.use_assistant_message)
    if body.streaming:
        return event_stream(frames, include=body.include_return_message_types, pings=False)
    gathered = await gather(frames, body.include_return_message_types)
    error = gathered.error
    if error is not None:  # a member's run failed: answered as that agent's would be
        return error_response(error["error_type"], error["message"] or "the group failed",
                              error["run_id"])
    return gathered.response()


@router.post("/stream", responses=streamed(400, 404, 409))
async def send_group_message_streaming(group_id: str, body: LettaStreamingRequest,
                                       runtime: RuntimeDep) -> StreamingResponse:
    """Send messages to the group and stream every member's run as SSE."""
    main = await _sleeptime_main(runtime, group_id)
    if main is not None:
        return await send_message_streaming(main, body, runtime)
    group, input = await _group(runtime, group_id), _input(body)
    return event_stream(_frames(group, input, stream_tokens=body.stream_tokens,
                                assistant_message=body.use_assistant_message),
                        include=body.include_return_message_types, pings=False)

