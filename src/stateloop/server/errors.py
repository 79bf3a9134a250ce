"""Our exceptions as HTTP errors: 404 unknown ids, 409 conflicts, 422 bad input, 503 when
archival memory cannot embed (no model, endpoint down), and any other exception as a 500
that leaves the connection usable.

Bodies are ``{"detail": "..."}``, as Letta's (FastAPI's) errors are; a 422's detail is
FastAPI's list of ``{"loc", "msg", "type"}``, the shape the OpenAPI document declares for it.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ..approvals import ApprovalError
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
