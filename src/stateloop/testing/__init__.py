"""Test helpers shipped for users: a scripted model and (``fake_openai``) a fake provider server."""

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

__all__ = ["ScriptExhausted", "ScriptedModel", "assert_transcript_valid", "call", "calls", "error",
           "raw_call", "reply", "transcript_problems"]
