"""Test helpers shipped for users: a scripted model, transcript checks, and ``FakeOpenAI``, a
fake provider server (OpenAI Chat Completions, Anthropic Messages, embeddings) over real HTTP.

The fake and its fault helpers load on first use, so importing this package stays cheap.
"""

from typing import TYPE_CHECKING, Any

from .invariants import assert_transcript_valid, transcript_problems
from .scripted import (
    ScriptedModel,
    ScriptExhausted,
    call,
    calls,
    error,
    raw_call,
    reply,
)

if TYPE_CHECKING:
    from .fake_openai import (
        FakeOpenAI,
        Fault,
        context_overflow,
        dropped_connection,
        http_error,
        malformed_chunk,
        overloaded,
        rate_limited,
        recorded,
        server_error,
    )

_FAKE = {"FakeOpenAI", "Fault", "context_overflow", "dropped_connection", "http_error",
         "malformed_chunk", "overloaded", "rate_limited", "recorded", "server_error"}

__all__ = ["FakeOpenAI", "Fault", "ScriptExhausted", "ScriptedModel", "assert_transcript_valid",
           "call", "calls", "context_overflow", "dropped_connection", "error", "http_error",
           "malformed_chunk", "overloaded", "rate_limited", "raw_call", "recorded", "reply",
           "server_error", "transcript_problems"]


def __getattr__(name: str) -> Any:
    if name in _FAKE:
        from . import fake_openai  # lazy: run as a script, it must not be imported first

        return getattr(fake_openai, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
