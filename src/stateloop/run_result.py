"""``RunResult``: what a run produced and why it stopped, as ``Agent.run`` returns it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .events import RunEnd, StopReason
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
    def from_event(cls, end: RunEnd) -> RunResult:
        pending = end.pending_approval.requested_calls if end.pending_approval else []
        return cls(end.output, end.stop_reason, end.steps, end.usage, end.messages, end.run_id,
                   end.error, pending)

