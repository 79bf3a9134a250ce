"""Our exceptions as HTTP errors: 404 unknown ids, 409 conflicts, 422 bad input, 503 when
archival memory cannot embed (no model, endpoint down), and any other exception as a 500
that leaves the connection usable.

Bodies are ``{"detail": "..."}``, as Letta's (FastAPI's) errors are; a 422's detail is
FastAPI's list of ``{"loc", "msg", "type"}``, the shape the OpenAPI document declares for it.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ..agent import Thread
from ..approvals import Approval, ApprovalError, PendingApproval
from ..errors import AgentBusyError, ConfigError, ToolDefinitionError
from ..memory.embeddings import EmbeddingError
from ..store import BlockLimitError, DuplicateError, EmbeddingMismatchError, NotFoundError
from .middleware import ASGIApp, Message, Receive, Scope, Send, reply

logger = logging.getLogger("stateloop.server")

_STATUS: list[tuple[type[Exception], int]] = [
    (NotFoundError, 404),
    (DuplicateError, 409),
    (AgentBusyError, 409),
    (ApprovalError, 409),
    (EmbeddingMismatchError, 409),
    (BlockLimitError, 422),
    (ConfigError, 422),
    (ToolDefinitionError, 422),
    (EmbeddingError, 503),
]


# Letta's approval errors (letta/errors.py, agents/helpers.py), word for word: its clients
# read them. Input while an approval is pending is a 409 whose detail names the request.
PENDING_APPROVAL = ("CONFLICT: Cannot send a new message: The agent is waiting for approval "
                    "on a tool call. Please approve or deny the pending request before "
                    "continuing.")
NO_PENDING_APPROVAL = ("Cannot process approval response: No tool call is currently awaiting "
                       "approval. Please send a regular message to interact with the agent.")


class PendingApprovalDetail(BaseModel):
    code: str
    message: str
    pending_request_id: str | None


class ConflictBody(BaseModel):
    """A 409: ``detail`` says why; for input sent while an approval is pending it is
    Letta's ``{"code": "PENDING_APPROVAL", "message", "pending_request_id"}``."""

    detail: str | PendingApprovalDetail


CONFLICT: dict[int | str, dict[str, Any]] = {409: {"model": ConflictBody,
                                                   "description": "Conflict"}}


def pending_approval_error(agent: Thread) -> HTTPException:
    """Letta's PendingApprovalError: the id is the message holding the awaited calls."""
    pending = agent.pending_approval
    awaited = set(pending.requested) if pending is not None else set()
    request_id = next((m.id for m in reversed(agent.messages)
                       if any(c.id in awaited for c in m.tool_calls)), None)
    return HTTPException(409, detail={"code": "PENDING_APPROVAL", "message": PENDING_APPROVAL,
                                      "pending_request_id": request_id})


def approval_mismatch(pending: PendingApproval | None, approvals: list[Approval],
                      error: ApprovalError) -> HTTPException:
    """A 400 for approvals that answer nothing pending, or other calls than those pending."""
    if pending is None:
        return HTTPException(400, detail=NO_PENDING_APPROVAL)
    expected, received = pending.requested, [a.tool_call_id for a in approvals]
    if set(expected) != set(received):
        return HTTPException(400, detail=f"Invalid tool call IDs. Expected '{expected}', but "
                                         f"received '{received}'.")
    return HTTPException(400, detail=str(error))  # e.g. two decisions for one call


def install(app: FastAPI) -> None:
    """Register a handler per exception type."""
    for exc_type, status in _STATUS:
        app.add_exception_handler(exc_type, _handler(status))


def _handler(status: int):  # type: ignore[no-untyped-def]
    async def handle(request: Request, exc: Exception) -> JSONResponse:
        if status == 422:
            detail: object = [{"loc": ["body"], "msg": str(exc), "type": "value_error"}]
        else:
            detail = str(exc)
        return JSONResponse({"detail": detail}, status_code=status)

    return handle


class InternalErrors:
    """An unexpected exception as a JSON 500, logged with its traceback.

    Starlette answers 500 and raises again, and uvicorn then closes the connection: the
    client's next request on it fails. Answered here, the exception goes no further and the
    connection stays open. A response already under way cannot be finished: that exception
    goes on, and the connection closes as it must.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception:
            if started:
                raise
            logger.exception("internal error on %s %s", scope["method"], scope["path"])
            await reply(send, 500, "internal server error (the server's log has the details)")
