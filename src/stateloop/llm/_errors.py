"""Provider failures turned into typed model errors, shared by the adapters.

Every adapter ends up with the same three facts about a failure: an HTTP status (or none,
for an error sent inside a stream), the provider's own error text, and sometimes an error
type such as Anthropic's ``overloaded_error`` or Google's ``RESOURCE_EXHAUSTED``.
``classify`` maps those to one ``ModelError`` subclass; the provider's text is passed
through unaltered.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from typing import Any

from ..errors import (
    AuthenticationError,
    ContextWindowExceeded,
    InvalidRequest,
    ModelError,
    Overloaded,
    RateLimited,
    Unavailable,
)

# The texts servers send when a prompt does not fit. Some servers answer 500 for this, so the
# text is checked before the status.
_CONTEXT_OVERFLOW = re.compile(
    "|".join([
        r"maximum context length",  # OpenAI, vLLM ("This model's maximum context length is ...")
        r"context_length_exceeded",  # OpenAI's error code
        r"input tokens exceed",  # OpenAI, newer models
        r"prompt is too long",  # Anthropic
        r"longer than the maximum model length",  # vLLM ("The decoder prompt (length N) is ...")
        r"larger than the max context size",  # older llama.cpp server
        r"exceed_context_size_error",  # llama.cpp server's error type
        # Gemini ("The input token count (N) exceeds the maximum number of tokens allowed (M).")
        r"exceeds the maximum number of tokens allowed",
        # Ollama ("input length exceeds the context length"), llama.cpp ("the request exceeds
        # the available context size"), Anthropic ("input length and `max_tokens` exceed
        # context limit") and the many "exceeds the context window" variants.
        r"exceed\w*\b.{0,40}\bcontext (?:length|size|window|limit)",
    ]),
    re.IGNORECASE,
)

# Google's APIs name the kind in ``status`` (gRPC codes) and an invalid key by ErrorInfo's
# reason ``API_KEY_INVALID``, sent with a 400.
_RATE_LIMIT_TYPES = {"rate_limit_error", "rate_limit_exceeded", "requests", "tokens",
                     "resource_exhausted"}
_OVERLOADED_TYPES = {"overloaded_error"}
_AUTH_TYPES = {"authentication_error", "permission_error", "invalid_api_key", "unauthenticated",
               "permission_denied", "api_key_invalid"}
_SERVER_TYPES = {"api_error", "server_error", "internal_server_error", "timeout_error",
                 "internal", "unavailable", "deadline_exceeded"}
# A spent quota answers 429 but waiting does not help.
_FINAL_429_CODES = {"insufficient_quota", "billing_hard_limit_reached"}


def is_context_overflow(text: str) -> bool:
    """Whether ``text`` is a provider's way of saying the prompt exceeds the context window."""
    return _CONTEXT_OVERFLOW.search(text) is not None


def classify(status: int | None, message: str, *, provider: str, error_type: str | None = None,
             code: str | None = None, retry_after: float | None = None) -> ModelError:
    """The typed error for a failed call; ``status`` is None for an error sent mid-stream."""
    kind = (error_type or "").lower()
    options: dict[str, Any] = {"provider": provider, "status_code": status,
                               "retry_after": retry_after}
    if is_context_overflow(message) or code == "context_length_exceeded":
        return ContextWindowExceeded(message, **options)
    if code in _FINAL_429_CODES:
        return ModelError(message, **options)
    if status == 429 or kind in _RATE_LIMIT_TYPES or code == "rate_limit_exceeded":
        return RateLimited(message, **options)
    if status == 529 or kind in _OVERLOADED_TYPES or (
            status in (500, 503) and "overloaded" in message.lower()):
        return Overloaded(message, **options)
    if status in (401, 403) or kind in _AUTH_TYPES or (code or "").lower() in _AUTH_TYPES:
        return AuthenticationError(message, **options)
    if status is None or status >= 500 or status in (408, 409) or kind in _SERVER_TYPES:
        return Unavailable(message, **options)
    return InvalidRequest(message, **options)


def error_details(body: object) -> tuple[str | None, str | None, str | None]:
    """``(message, type, code)`` from an error body in any of the shapes servers use."""
    if isinstance(body, str):
        return body or None, None, None
    if not isinstance(body, Mapping):
        return None, None, None
    inner = body.get("error")
    if isinstance(inner, str):  # Ollama, some proxies: {"error": "text"}
        return inner, _str(body.get("type")), _str(body.get("code"))
    if isinstance(inner, Mapping):  # OpenAI, Anthropic, llama.cpp, Google: {"error": {...}}
        body = inner
    kind = body.get("type") or body.get("status")  # Google: "status": "RESOURCE_EXHAUSTED"
    code = _detail(body, "ErrorInfo", "reason") or body.get("code")
    return _str(body.get("message")), _str(kind), _str(code)


def _detail(body: Mapping[str, Any], kind: str, key: str) -> Any:
    """A field of the ``google.rpc`` detail of type ``kind`` in a Google error, or None."""
    details = body.get("details")
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith(f".{kind}"):
            return detail.get(key)
    return None


def retry_info_seconds(body: object) -> float | None:
    """Seconds to wait from a Google error's ``RetryInfo`` detail (``"retryDelay": "37s"``)."""
    inner = body.get("error") if isinstance(body, Mapping) else None
    delay = _detail(inner, "RetryInfo", "retryDelay") if isinstance(inner, Mapping) else None
    if not isinstance(delay, str) or not delay.endswith("s"):
        return None
    try:
        return max(0.0, float(delay[:-1]))
    except ValueError:
        return None


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())
