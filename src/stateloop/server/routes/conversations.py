"""``/v1/conversations``: threads of one agent sharing its memory (create, list, retrieve,
update, delete, fork), their messages (list, send, preview), and their runs (resume the
stream, cancel), system prompt (recompile) and context (compact).

Conversation id ``default`` with ``agent_id`` (or an agent's id in its place) is the agent's
own thread, as in Letta."""

from __future__ import annotations

from itertools import groupby
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from ...agent import Thread
from ...conversation import Conversation as LiveConversation
from ...errors import AgentBusyError, ConfigError
from ..deps import RuntimeDep
from ..errors import CONFLICT
from ..models.conversations import (
    CompactionRequest,
    Conversation,
    ConversationMessageRequest,
    ConversationStreamRequest,
    CreateConversation,
    UpdateConversation,
    conversation_view,
)
from ..models.requests import errors, streamed
from ..models.responses import LettaResponse
from ..pagination import Order
from ..run_errors import failure_responses
from ..services import fleet
from ..services.agent_fields import model_settings
from ..services.messages import history_frames
from ..services.run_frames import follow_stored
from ..services.runtime import Runtime
from ..sse import event_stream, wanted
from .agent_ops import CompactionResponse, compact_thread, preview_thread
from .agents import live_agent
from .context import recompile_thread
from .messages import cancel_thread, collect, start_run, stream

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


async def thread(runtime: Runtime, conversation_id: str, agent_id: str | None = None) -> Thread:
    """The live thread a conversation id names: a ``Conversation``, or the agent itself for
    ``default`` (with ``agent_id``) or an agent's id."""
    if conversation_id == "default" or conversation_id.startswith("agent-"):
        owner = agent_id if conversation_id == "default" else conversation_id
        if owner is None:
            raise HTTPException(422, detail=[{
                "loc": ["query", "agent_id"], "type": "missing",
                "msg": "conversation 'default' needs agent_id: the agent's own thread"}])
        return await live_agent(runtime, owner)
    record = await runtime.store.get_conversation(conversation_id)  # 404
    agent = await live_agent(runtime, record.agent_id)
    conversation = await agent.aconversation(conversation_id)
    use_settings(conversation, settings_for(conversation, record.model_settings))
    return conversation


def settings_for(thread: Thread, settings: dict[str, Any] | None,
                 model: str | None = None) -> dict[str, Any]:
    """The options a conversation's ``model_settings`` (Letta's shape) ask for, over its
    agent's; a value that is invalid, or that the model's provider has no form for, is a
    422 naming it."""
    provider = (model or thread.model.name).partition("/")[0]
    return model_settings(settings, None, provider, thread.model_settings) if settings else {}


def use_settings(thread: Thread, options: dict[str, Any]) -> None:
    for name, value in options.items():  # max_tokens, parallel_tool_calls, model_settings
        setattr(thread, name, value)


async def view(runtime: Runtime, conversation: Thread) -> dict[str, Any]:
    record = await runtime.store.get_conversation(conversation.conversation_id or "")
    return conversation_view(record, [m.id for m in conversation.messages])


@router.post("", responses=errors(400, 404), response_model=Conversation)
async def create_conversation(agent_id: str, runtime: RuntimeDep,
                              body: CreateConversation | None = None) -> dict[str, Any]:
    """A new thread of the agent: its own messages and context, the agent's memory (blocks
    named in ``isolated_block_labels`` are copies of its own)."""
    body = body or CreateConversation()
    agent = await live_agent(runtime, agent_id)
    options = settings_for(agent, body.model_settings, body.model)  # checked before storing
    try:
        conversation = await agent.aconversation(
            summary=body.summary, isolated_block_labels=body.isolated_block_labels or (),
            model=body.model)
    except ConfigError as exc:
        raise HTTPException(404 if "no blocks" in str(exc) else 400, detail=str(exc)) from exc
    if body.model_settings is not None:
        use_settings(conversation, options)
        await runtime.store.update_conversation(conversation.key,
                                                model_settings=body.model_settings)
    return await view(runtime, conversation)


@router.get("", responses=errors(404), response_model=list[Conversation])
async def list_conversations(
    runtime: RuntimeDep, agent_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50, after: str | None = None,
    summary_search: str | None = None, order: Order = "desc",
    order_by: Literal["created_at", "last_message_at"] = "created_at",
) -> list[dict[str, Any]]:
    """Conversations (of one agent, if given), a page at a time (``after``: an id)."""
    records = await runtime.store.list_conversations(
        agent_id, after=after, limit=limit, order=order, order_by=order_by,
        summary_search=summary_search)
    return [conversation_view(record) for record in records]


@router.get("/{conversation_id}", responses=errors(404), response_model=Conversation)
async def retrieve_conversation(conversation_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    return conversation_view(await runtime.store.get_conversation(conversation_id))


@router.patch("/{conversation_id}", responses=errors(400, 404), response_model=Conversation)
async def update_conversation(conversation_id: str, body: UpdateConversation,
                              runtime: RuntimeDep) -> dict[str, Any]:
    """Change the summary, model or model settings (the given fields)."""
    changes = body.model_dump(exclude_unset=True)
    conversation = await thread(runtime, conversation_id)
    options = settings_for(conversation, changes.get("model_settings"), changes.get("model"))
    if changes.get("model") is not None:
        try:
            conversation.model = changes["model"]
        except ConfigError as exc:
            raise HTTPException(400, detail=str(exc)) from exc
    use_settings(conversation, options)
    if "summary" in changes and isinstance(conversation, LiveConversation):
        conversation.summary = changes["summary"]
    return conversation_view(await runtime.store.update_conversation(conversation_id,
                                                                     **changes))


@router.delete("/{conversation_id}", responses={**errors(404), **CONFLICT})
async def delete_conversation(conversation_id: str, runtime: RuntimeDep) -> None:
    """Delete the conversation, its messages and isolated blocks; the agent keeps the rest."""
    record = await runtime.store.get_conversation(conversation_id)
    agent = await live_agent(runtime, record.agent_id)
    try:
        await agent.delete_conversation(conversation_id)
    except AgentBusyError as exc:
        raise HTTPException(409, detail=str(exc)) from exc


@router.post("/{conversation_id}/fork", responses=errors(404), response_model=Conversation)
async def fork_conversation(conversation_id: str, runtime: RuntimeDep, request: Request,
                            agent_id: str | None = None) -> dict[str, Any]:
    """A new conversation starting from copies of this one's messages in context (through
    the query's ``message_id``, as newer letta-clients send it, if given)."""
    source = await thread(runtime, conversation_id, agent_id)
    message_id = request.query_params.get("message_id")
    try:
        return await view(runtime, await source.afork(message_id))
    except ConfigError as exc:
        raise HTTPException(404, detail=str(exc)) from exc


@router.get("/{conversation_id}/messages", responses=errors(400, 404))
async def list_conversation_messages(
    conversation_id: str, runtime: RuntimeDep, agent_id: str | None = None,
    before: str | None = None, after: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=1000)] = 100, order: Order = "desc",
    include_return_message_types: Annotated[list[str] | None, Query()] = None,
) -> list[dict[str, Any]]:
    """The conversation's messages, a page at a time (cursors are message ids). As in
    Letta, ``order=desc`` lists a conversation's messages newest first (the parts of one
    message keep their order); the agent's own thread (``default``) reads as the agent's
    history does: the newest page, oldest first."""
    conversation = await thread(runtime, conversation_id, agent_id)
    if conversation.conversation_id is None:
        stored = await runtime.store.list_messages(conversation.id, before=before, after=after,
                                                   limit=limit or 100, order=order,
                                                   own_thread=True)
    else:
        stored = await runtime.store.list_conversation_messages(
            conversation_id, before=before, after=after, limit=limit or 100, order=order)
    if order == "desc":
        stored.reverse()
    pending = conversation.pending_approval
    ids = set(pending.requested) if pending is not None else set()
    frames = await history_frames(runtime.store, stored, approval_ids=ids)
    if order == "desc" and conversation.conversation_id is not None:
        parts = [list(group) for _, group in groupby(frames, key=lambda f: f["id"])]
        frames = [frame for group in reversed(parts) for frame in group]
    return [f for f in frames if wanted(f, include_return_message_types)]


@router.post("/{conversation_id}/messages", response_model=None,
             responses={**failure_responses(), **streamed(400, 404, model=LettaResponse),
                        **CONFLICT})
async def send_conversation_message(conversation_id: str, body: ConversationMessageRequest,
                                    runtime: RuntimeDep) -> JSONResponse | StreamingResponse:
    """Send messages (or approvals) to the conversation; SSE unless ``streaming: false``."""
    conversation = await thread(runtime, conversation_id, body.agent_id)
    channel = await start_run(runtime, conversation.id, body, agent=conversation,
                              stream_tokens=body.streaming and body.stream_tokens)
    if body.streaming:
        return stream(runtime, channel, body)
    return await collect(channel, body.include_return_message_types)


@router.post("/{conversation_id}/messages/preview-raw-payload", responses=errors(404, 409))
async def preview_conversation_model_request(conversation_id: str,
                                             body: ConversationMessageRequest,
                                             runtime: RuntimeDep) -> dict[str, Any]:
    """The body the conversation's next model call would send for this input; nothing is
    stored."""
    conversation = await thread(runtime, conversation_id, body.agent_id)
    return preview_thread(conversation, body, runtime)


@router.post("/{conversation_id}/stream", responses=streamed(400, 404, 409))
async def retrieve_conversation_stream(conversation_id: str, runtime: RuntimeDep,
                                       body: ConversationStreamRequest | None = None
                                       ) -> StreamingResponse:
    """The stream of the conversation's run in flight (or of ``run_id``, which must be one
    of its runs, finished too while the server keeps it), from ``starting_after``. As in
    Letta, without ``run_id`` and no run in flight it is a 400."""
    request = body or ConversationStreamRequest()
    conversation = await thread(runtime, conversation_id, request.agent_id)
    ping = (request.poll_interval or runtime.settings.ping_interval
            if request.include_pings else None)
    run_id = request.run_id
    if run_id is not None:
        run = await runtime.store.get_run(run_id)  # 404
        if (run.agent_id != conversation.id
                or run.metadata.get("conversation_id") != conversation.conversation_id):
            raise HTTPException(404, detail=f"run {run_id!r} is not a run of conversation "
                                            f"{conversation_id!r}")
        channel = runtime.runs.get(run_id)
    else:
        channel = runtime.runs.active.get(conversation.conversation_id or conversation.id)
    if channel is not None:
        return event_stream(channel.follow(request.starting_after, ping_interval=ping),
                            pings=request.include_pings, run_id=channel.run_id)
    if runtime.store.dialect == "postgresql":  # run by another process: followed in the store
        run_id = run_id or next(iter(await fleet.thread_runs(
            runtime, conversation.id, conversation.conversation_id)), None)
        if run_id is not None:
            return event_stream(follow_stored(runtime.store, run_id, request.starting_after,
                                              ping_interval=ping),
                                pings=request.include_pings, run_id=run_id)
    if run_id is not None:
        raise HTTPException(400, detail=f"Run {run_id} has ended and its stream is no longer "
                                        "kept.")
    raise HTTPException(400, detail="No active runs found for this conversation.")


@router.post("/{conversation_id}/cancel", responses=errors(404))
async def cancel_conversation(conversation_id: str, runtime: RuntimeDep,
                              agent_id: str | None = None) -> dict[str, Any]:
    """Cancel the conversation's run in flight (or deny what awaits approval); the run ids
    cancelled (none when it was idle)."""
    conversation = await thread(runtime, conversation_id, agent_id)
    key = conversation.conversation_id
    holder = None if conversation.running else await fleet.held_elsewhere(
        runtime, conversation.id, key)
    if holder is not None:  # in flight in another process: it is asked to cancel
        ids = await fleet.thread_runs(runtime, conversation.id, key)
        await fleet.ask(runtime, holder, "cancel", conversation.id, key)
        return dict.fromkeys(ids, "cancelled")
    return await cancel_thread(runtime, conversation)


@router.post("/{conversation_id}/recompile", responses=errors(404), response_model=str)
async def recompile_conversation(conversation_id: str, runtime: RuntimeDep,
                                 dry_run: bool = False,
                                 body: CompactionRequest | None = None) -> str:
    """The conversation's system prompt compiled now from the agent's memory (and its own
    isolated blocks); unless ``dry_run`` it becomes the conversation's first message."""
    conversation = await thread(runtime, conversation_id, body.agent_id if body else None)
    return await recompile_thread(conversation, dry_run)


@router.post("/{conversation_id}/compact", responses=errors(400, 404),
             response_model=CompactionResponse)
async def compact_conversation(conversation_id: str, runtime: RuntimeDep,
                               body: CompactionRequest | None = None) -> dict[str, Any]:
    """Compact the conversation's context now; the agent's other threads are untouched."""
    conversation = await thread(runtime, conversation_id, body.agent_id if body else None)
    return await compact_thread(conversation, body.compaction_settings if body else None)
