"""``/v1/messages/batches``: requests to many agents submitted at once. Each request runs as an
ordinary run of its agent (queued behind the agent's other runs), a bounded number of a
batch at a time (``STATELOOP_BATCH_CONCURRENCY``); the batch lists each request's run, stop
reason and error, its messages are listed together, and it may be cancelled. A batch and its
requests are stored: the requests not yet run when a server stops run once one is started
again (services/batches.py). A batch is of the project its request acted in: another
project's is not found (the ``guard`` resolves ``batch_id``), nor listed."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import Field

from ...agent_file.letta_messages import to_letta
from ...persistence import run_status
from ...store import Page
from ...store.history import run_metadata
from ...store.records import BatchRecord, BatchRequestRecord
from ..deps import RuntimeDep
from ..limits import billed_to_agent
from ..models.requests import CancelAgentRunRequest, Lenient, LettaRequest, errors
from ..models.responses import iso
from ..pagination import Limit, Order
from ..services.batches import Outcome, Started
from ..services.callbacks import check_callback_url
from ..services.creation import unprocessable
from ..services.runtime import Runtime
from .messages import cancel, start_run

router = APIRouter(prefix="/v1/messages/batches", tags=["messages"])

REQUEST_BYTES = 1024 * 1024  # one request's JSON at most
ACTIVE = ("running",)  # what the list shows, as Letta lists its created and running batches


class BatchRequest(LettaRequest):
    """Letta's ``LettaBatchRequest``: a ``LettaRequest`` for one agent."""

    agent_id: str = Field(min_length=1, max_length=100)


class CreateBatch(Lenient):
    requests: list[BatchRequest] = Field(min_length=1)
    callback_url: str | None = Field(default=None, min_length=1, max_length=2083)


def batch_view(batch: BatchRecord) -> dict[str, Any]:
    """Letta's ``BatchJob``; ``metadata.requests`` lists each request's agent, status, run,
    stop reason and error, in the order they were given."""
    callback = batch.callback or {}
    return {
        "id": batch.id, "status": batch.status, "job_type": "batch",
        "created_at": iso(batch.created_at), "updated_at": iso(batch.updated_at),
        "completed_at": iso(batch.completed_at) if batch.completed_at else None,
        "stop_reason": {"completed": "end_turn", "cancelled": "cancelled"}.get(batch.status),
        "metadata": {"job_type": "batch_messages", "requests": [
            {"agent_id": r.agent_id, "status": r.status, "run_id": r.run_id,
             "stop_reason": r.stop_reason, "error": r.error} for r in batch.requests]},
        "background": None, "agent_id": None, "user_id": None, "created_by_id": None,
        "last_updated_by_id": None, "callback_url": batch.callback_url,
        "callback_sent_at": iso(callback["sent_at"]) if callback.get("sent_at") else None,
        "callback_status_code": callback.get("status_code"),
        "callback_error": callback.get("error"), "ttft_ns": None, "total_duration_ns": None}


def _requests(body: CreateBatch, most: int) -> list[BatchRequestRecord]:
    """The stored form of the batch's requests; 422 naming the first that is empty or too
    large, or the list when it is longer than ``most``."""
    if len(body.requests) > most:
        raise unprocessable("requests", f"a batch holds at most {most} requests "
                                        f"(STATELOOP_BATCH_MAX_REQUESTS), not {len(body.requests)}")
    records = []
    for index, request in enumerate(body.requests):
        if request.input is None and not request.messages:
            raise unprocessable(f"requests.{index}", "nothing to send: give 'messages' or "
                                                     "'input'")
        if request.input is not None and request.messages is not None:
            raise unprocessable(f"requests.{index}", "give 'input' or 'messages', not both")
        stored = request.model_dump(mode="json", exclude={"agent_id"}, exclude_none=True)
        size = len(json.dumps(stored))
        if size > REQUEST_BYTES:
            raise unprocessable(f"requests.{index}", f"a request's JSON is {size} bytes; at "
                                                     f"most {REQUEST_BYTES} are taken")
        records.append(BatchRequestRecord(agent_id=request.agent_id, request=stored))
    return records


@router.post("", responses=errors(404))
async def create_batch(body: CreateBatch, runtime: RuntimeDep) -> dict[str, Any]:
    """Submit requests to many agents; they run in the background, a bounded number at a
    time. An unknown agent (or one of another project) is a 404 naming its request, and
    then nothing runs."""
    records = _requests(body, runtime.settings.batch_max_requests)
    if body.callback_url is not None:
        await check_callback_url(body.callback_url,
                                 private_ok=runtime.settings.callback_private_urls)
    batch = BatchRecord(requests=records, callback_url=body.callback_url)
    await runtime.store.add_batch(batch)  # 404 naming the first unknown agent
    if runtime.batches is not None:
        runtime.batches.wake()
    return batch_view(batch)


@router.get("", response_model=None)
async def list_batches(runtime: RuntimeDep, before: str | None = None,
                       after: str | None = None,
                       limit: Annotated[int | None, Query(ge=1, le=100)] = 100,
                       order: Order = "desc",
                       order_by: Literal["created_at"] = "created_at"
                       ) -> list[dict[str, Any]]:
    """The batches still running (as Letta lists its created and running ones), newest
    first by default, 100 at most (each lists its requests). A finished or cancelled batch
    is retrieved by its id."""
    batches = await runtime.store.list_batches(
        Page(after=after, before=before, limit=limit, order=order), statuses=ACTIVE)
    return [batch_view(batch) for batch in batches]


@router.get("/{batch_id}", responses=errors(404))
async def retrieve_batch(batch_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    return batch_view(await runtime.store.get_batch(batch_id))


@router.get("/{batch_id}/messages", responses=errors(404))
async def list_messages_for_batch(
        batch_id: str, runtime: RuntimeDep, before: str | None = None,
        after: str | None = None, limit: Limit = 100, order: Order = "desc",
        order_by: Literal["created_at"] = "created_at",
        agent_id: Annotated[str | None, Query(max_length=100)] = None) -> dict[str, Any]:
    """The messages the batch's runs added (each request's input included), as Letta's
    ``Message`` objects, newest first by default; of one agent's request with ``agent_id``."""
    batch = await runtime.store.get_batch(batch_id)
    items = {r.run_id: r for r in batch.requests
             if r.run_id is not None and (agent_id is None or r.agent_id == agent_id)}
    found = await runtime.store.list_batch_messages(
        list(items), Page(after=after, before=before, limit=limit, order=order))
    messages = []
    for message, owner, run_id in found:
        view = to_letta(message, message.id, owner, None)
        del view["type"]  # an Agent File's tag, not a field of Letta's Message
        view.update(run_id=run_id, batch_item_id=items[run_id].id, step_id=None,
                    updated_at=view["created_at"], is_err=None, conversation_id=None,
                    created_by_id=None, last_updated_by_id=None)
        messages.append(view)
    return {"messages": messages}


@router.patch("/{batch_id}/cancel", responses=errors(404))
async def cancel_batch(batch_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Cancel the batch: requests not started never start; running ones are cancelled as a
    run cancel does, by the process running them. A batch already over is left as it was."""
    batch = await runtime.store.cancel_batch(batch_id)
    if runtime.batches is not None:
        runtime.batches.wake()
    return batch_view(batch)


async def execute(runtime: Runtime, record: BatchRequestRecord, started: Started) -> Outcome:
    """Run one request as an async send of its agent (queued behind its other runs), the run
    stored with the batch's and the request's ids and billed to the agent's project; how it
    ended. A project over its daily limit (``OverDailyTokens``) fails the request."""
    body = LettaRequest.model_validate(record.request)
    token = run_metadata.set({record.agent_id: {"batch_id": record.batch_id,
                                                "batch_request_id": record.id}})
    try:
        # its project's day pays for the run; over its daily limit, it fails naming it
        async with billed_to_agent(runtime.meter, record.agent_id):
            channel = await start_run(runtime, record.agent_id, body)
    except HTTPException as exc:  # refused: an approval pending, the input too large, ...
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        return Outcome("failed", None, "error", detail)
    finally:
        run_metadata.reset(token)
    assert channel.run_id is not None
    await started(channel.run_id)
    error = None
    async for frame in channel.follow(0):
        if frame is not None and frame.get("message_type") == "error_message":
            error = str(frame.get("message"))
    end = channel.end
    if end is None:
        return Outcome("failed", channel.run_id, "error", error or "the run ended early")
    status = run_status(end.stop_reason)
    return Outcome(status, channel.run_id, end.stop_reason,
                   (end.error or error) if status == "failed" else None)


async def stop(runtime: Runtime, record: BatchRequestRecord) -> None:
    """Cancel the run a request started, in whichever process it runs."""
    assert record.run_id is not None
    await cancel(record.agent_id, runtime, CancelAgentRunRequest(run_ids=[record.run_id]))
