"""A failed run, answered over plain (non-streaming) REST as Letta answers it: an HTTP error
whose body says why, instead of a 200 whose stop reason alone hints at it.

Letta raises out of a failed step and its exception handlers pick the status by the kind of
provider error (429 rate limit, 401 authentication, 400 bad request, 503 overloaded, 500 for
the rest) with ``{"error": {"type", "message", "detail"}}``. The body here carries that, plus
``detail`` (the shape of every other stateloop error) and the run's id and stop reason.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from ..errors import (
    AuthenticationError,
    ContextWindowExceeded,
    InvalidRequest,
    Overloaded,
    RateLimited,
)
from ..persistence import run_status
from .models.requests import ErrorBody

# A run's error text starts with the provider error's class name (model_call._describe).
_BY_KIND: dict[str, tuple[int, str, str]] = {
    RateLimited.__name__: (429, "llm_rate_limit",
                           "Rate limit exceeded for LLM model provider. Please wait before "
                           "making another request."),
    AuthenticationError.__name__: (401, "llm_authentication",
                                   "Authentication failed with the LLM model provider."),
    InvalidRequest.__name__: (400, "llm_bad_request",
                              "The request to the LLM model provider was invalid."),
    ContextWindowExceeded.__name__: (400, "llm_bad_request",
                                     "The request to the LLM model provider was invalid."),
    Overloaded.__name__: (503, "llm_overloaded", "The LLM model provider is overloaded."),
}
_LLM_ERROR = (500, "llm_error", "An error occurred with the LLM request.")

STATUSES = {400: "Bad Request", 401: "Unauthorized", 429: "Too Many Requests",
            500: "Internal Server Error", 503: "Service Unavailable"}


def failed(stop_reason: str, error: str | None) -> bool:
    """Whether a run that stopped so is answered with an error rather than its messages."""
    return run_status(stop_reason) == "failed" and bool(error)  # type: ignore[arg-type]


def error_response(stop_reason: str, error: str, run_id: str | None) -> JSONResponse:
    if stop_reason == "llm_api_error":
        status, kind, message = _BY_KIND.get(error.partition(" ")[0].rstrip(":"), _LLM_ERROR)
    elif stop_reason == "context_window_overflow_in_system_prompt":  # the agent's settings
        status, kind, message = 400, stop_reason, ("The agent's context window cannot hold "
                                                   "its system prompt.")
    else:
        status, kind, message = 500, stop_reason, "The run failed."
    body = {"detail": error, "error": {"type": kind, "message": message, "detail": error},
            "run_id": run_id, "stop_reason": stop_reason}
    # The run happened (its input is stored): a client retrying would send it again.
    return JSONResponse(body, status_code=status, headers={"x-should-retry": "false"})


def failure_responses() -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries for the statuses a failed run is answered with."""
    return {status: {"model": ErrorBody, "description": meaning}
            for status, meaning in STATUSES.items()}
