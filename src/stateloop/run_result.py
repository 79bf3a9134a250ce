"""``RunResult``: what a run produced and why it stopped, as ``Agent.run`` returns it; and
``Running``, a run in flight."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from .events import AnyEvent, RunEnd, StopReason
from .messages import Message, ToolCall, Usage


@dataclass(slots=True)
class RunResult:
    """What a run produced and why it stopped."""

    output: Any  # the answer's text; with an output_type, the validated value (or None)
    stop_reason: StopReason
    steps: int
    usage: Usage
    messages: list[Message]  # the messages this run added, input included
    run_id: str
    error: str | None = None
    pending_approvals: list[ToolCall] = field(default_factory=list)

    @classmethod
    def from_event(cls, end: RunEnd, typed: bool = False) -> RunResult:
        """The result of a run that ended with ``end``; ``typed``: it had an output_type."""
        pending = end.pending_approval.requested_calls if end.pending_approval else []
        return cls(end.data if typed else end.output, end.stop_reason, end.steps, end.usage,
                   end.messages, end.run_id, end.error, pending)



@dataclass(slots=True)
class Running:
    """A run in flight, as ``Agent._running`` hands it out."""

    events: AsyncIterator[AnyEvent]
    end: RunEnd | None = None  # set as the loop yields it

    @classmethod
    def ended(cls, end: RunEnd) -> Running:
        """A run that is over already: only its end."""
        return cls(_once(end), end)


async def _once(event: AnyEvent) -> AsyncIterator[AnyEvent]:
    yield event
