"""Our exceptions as HTTP errors: 404 unknown ids, 409 conflicts, 422 bad input.

Bodies are ``{"detail": "..."}``, as Letta's (FastAPI's) errors are; a 422's detail is
FastAPI's list of ``{"loc", "msg", "type"}``, the shape the OpenAPI document declares for it.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ..approvals import ApprovalError
from ..errors import AgentBusyError, ConfigError, ToolDefinitionError
from ..store import BlockLimitError, DuplicateError, EmbeddingMismatchError, NotFoundError

_STATUS: list[tuple[type[Exception], int]] = [
    (NotFoundError, 404),
    (DuplicateError, 409),
    (AgentBusyError, 409),
    (ApprovalError, 409),
    (EmbeddingMismatchError, 409),
    (BlockLimitError, 422),
    (ConfigError, 422),
    (ToolDefinitionError, 422),
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
