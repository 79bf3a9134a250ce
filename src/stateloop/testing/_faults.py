"""Injected failures for the fake server, worded the way each provider words them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .scripted import ErrorReply, error


@dataclass(slots=True)
class Fault:
    """A failure served instead of a reply; ``drop`` and ``malformed`` cut a real reply short."""

    kind: Literal["status", "malformed", "drop"]
    status: int = 500
    message: str | None = None  # None: the provider's usual text for ``status``
    retry_after: float | None = None
    after_chunks: int = 2  # drop / malformed: stream events sent before the failure
    error_kind: str | None = None  # a ``stateloop.errors`` kind, picks the provider's wording


def http_error(status: int, message: str | None = None, *,
               retry_after: float | None = None) -> Fault:
    """Answer with HTTP ``status`` and the provider's error body."""
    return Fault("status", status, message, retry_after)


def rate_limited(retry_after: float | None = 0.0, message: str | None = None) -> Fault:
    """A 429 with a Retry-After header."""
    return Fault("status", 429, message, retry_after, error_kind="rate_limit")


def server_error(message: str | None = None) -> Fault:
    """A 500."""
    return Fault("status", 500, message, error_kind="server_error")


def overloaded(message: str | None = None) -> Fault:
    """Anthropic's 529 ``overloaded_error`` (Gemini's 503 ``UNAVAILABLE``)."""
    return Fault("status", 529, message, error_kind="overloaded")


def context_overflow(message: str | None = None) -> Fault:
    """A 400 saying the prompt exceeds the context window, in the provider's own words."""
    return Fault("status", 400, message, error_kind="context_overflow")


def malformed_chunk(after_chunks: int = 1) -> Fault:
    """A stream whose event number ``after_chunks`` is not JSON."""
    return Fault("malformed", after_chunks=after_chunks)


def dropped_connection(after_chunks: int = 2) -> Fault:
    """A stream whose connection closes after ``after_chunks`` events."""
    return Fault("drop", after_chunks=after_chunks)


STATUS_TYPES = {
    "openai": {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests",
               500: "server_error", 503: "server_error", 529: "server_error"},
    "anthropic": {400: "invalid_request_error", 401: "authentication_error",
                  429: "rate_limit_error", 500: "api_error", 503: "api_error",
                  529: "overloaded_error"},
}

MESSAGES = {
    ("openai", "rate_limit"): "Rate limit reached for requests. Please try again in 1s.",
    ("openai", "server_error"): "The server had an error while processing your request.",
    ("openai", "overloaded"): "The engine is currently overloaded, please try again later",
    ("openai", "context_overflow"): (
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130532 tokens. Please reduce the length of the messages."),
    ("openai", "authentication"): "Incorrect API key provided.",
    ("anthropic", "rate_limit"): "Number of request tokens has exceeded your per-minute rate "
                                 "limit",
    ("anthropic", "server_error"): "Internal server error",
    ("anthropic", "overloaded"): "Overloaded",
    ("anthropic", "context_overflow"): "prompt is too long: 208310 tokens > 200000 maximum",
    ("anthropic", "authentication"): "invalid x-api-key",
    ("gemini", "rate_limit"): "Resource has been exhausted (e.g. check quota).",
    ("gemini", "server_error"): "An internal error has occurred. Please retry or report in "
                                "https://developers.generativeai.google/guide/troubleshooting",
    ("gemini", "overloaded"): "The model is overloaded. Please try again later.",
    ("gemini", "context_overflow"): "The input token count (1196265) exceeds the maximum "
                                    "number of tokens allowed (1048576).",
    ("gemini", "authentication"): "API key not valid. Please pass a valid API key.",
}

ERROR_STATUS = {"rate_limit": 429, "overloaded": 529, "server_error": 500,
                 "context_overflow": 400, "invalid_request": 400, "authentication": 401}


def fault_for(item: ErrorReply) -> Fault:
    """The fault that serves a scripted ``error(kind)``."""
    if item.kind == "invalid_response":
        return malformed_chunk(0)
    status = item.status_code or ERROR_STATUS.get(item.kind, 500)
    default = item.message == DEFAULT_TEXTS.get(item.kind)  # use the provider's wording then
    return Fault("status", status, None if default else item.message, item.retry_after,
                 error_kind=item.kind)


DEFAULT_TEXTS = {kind: error(kind).message for kind in ERROR_STATUS}
