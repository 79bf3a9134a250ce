"""Checks of invariant 1 in docs/design.md, for tests of anything that edits a transcript."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..messages import Message


def transcript_problems(messages: Sequence[Message], pending: Iterable[str] = ()) -> list[str]:
    """Every way ``messages`` breaks "each tool call has exactly one result, right after its
    assistant message, in call order"; empty when it holds. Calls in ``pending`` (awaiting
    approval) may stay unanswered at the end."""
    problems: list[str] = []
    expected: list[str] = []  # call ids still to be answered, in order
    for index, message in enumerate(messages):
        if message.role == "tool":
            if not expected:
                problems.append(f"message {index}: tool result {message.tool_call_id!r} "
                                f"answers no open call")
            elif message.tool_call_id != expected[0]:
                problems.append(f"message {index}: tool result {message.tool_call_id!r} where "
                                f"the result of {expected[0]!r} was due")
                expected.pop(0)
            else:
                expected.pop(0)
            continue
        if expected:
            problems.append(f"message {index}: {message.role} message while calls "
                            f"{expected} are unanswered")
            expected = []
        if message.role == "assistant":
            expected = [call.id for call in message.tool_calls]
    expected = [call_id for call_id in expected if call_id not in set(pending)]
    if expected:
        problems.append(f"end of transcript: calls {expected} are unanswered")
    return problems


def assert_transcript_valid(messages: Sequence[Message], pending: Iterable[str] = ()) -> None:
    """Raise AssertionError listing every problem ``transcript_problems`` finds."""
    problems = transcript_problems(messages, pending)
    if problems:
        raise AssertionError("invalid transcript:\n" + "\n".join(problems))
