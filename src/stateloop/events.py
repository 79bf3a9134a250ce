"""The typed events of a run's stream. ``event.type`` names each one."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from .approvals import PendingApproval
from .messages import Message, ToolCall, Usage

StopReason = Literal[
    "end_turn",
    "max_steps",
    "tool_rule",
    "requires_approval",
    "cancelled",
    "error",
    "llm_api_error",
    "invalid_llm_response",
    "invalid_tool_call",
    "max_tokens_exceeded",
    "context_window_overflow_in_system_prompt",
    "timeout",
    "error_threshold",
    "invalid_output",  # an output_type answer failed validation output_retries + 1 times
]
"""Why a run ended (Letta's names, plus ``timeout``, ``error_threshold`` and
``invalid_output``): ``RunResult.stop_reason`` and the ``run_end`` event's."""


class Event:
    """Base of all events; subclasses are slotted dataclasses with a class-level ``type``."""

    __slots__ = ()
    type: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            data[f.name] = _jsonable(getattr(self, f.name))
        return data


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


@dataclass(slots=True)
class RunStart(Event):
    type: ClassVar[Literal["run_start"]] = "run_start"
    run_id: str
    agent_id: str


@dataclass(slots=True)
class StepStart(Event):
    type: ClassVar[Literal["step_start"]] = "step_start"
    step: int  # 1-based within the run
    message_id: str = ""  # the id the step's response message will have


@dataclass(slots=True)
class TextDelta(Event):
    type: ClassVar[Literal["text_delta"]] = "text_delta"
    delta: str


@dataclass(slots=True)
class ReasoningDelta(Event):
    type: ClassVar[Literal["reasoning_delta"]] = "reasoning_delta"
    delta: str


@dataclass(slots=True)
class ToolCallStart(Event):
    type: ClassVar[Literal["tool_call_start"]] = "tool_call_start"
    index: int
    id: str
    name: str


@dataclass(slots=True)
class ToolCallDelta(Event):
    """A fragment of a call's JSON arguments, as streamed (not valid JSON on its own)."""

    type: ClassVar[Literal["tool_call_delta"]] = "tool_call_delta"
    index: int
    delta: str


@dataclass(slots=True)
class ToolCallEnd(Event):
    type: ClassVar[Literal["tool_call_end"]] = "tool_call_end"
    tool_call: ToolCall


@dataclass(slots=True)
class ToolExecutionStart(Event):
    type: ClassVar[Literal["tool_execution_start"]] = "tool_execution_start"
    tool_call: ToolCall


@dataclass(slots=True)
class ToolExecutionEnd(Event):
    type: ClassVar[Literal["tool_execution_end"]] = "tool_execution_end"
    tool_call: ToolCall
    result: Message  # the tool message appended to the transcript

    @property
    def is_error(self) -> bool:
        return self.result.is_error


@dataclass(slots=True)
class MessageEvent(Event):
    """A complete message appended to the transcript (assistant, tool, or injected user input)."""

    type: ClassVar[Literal["message"]] = "message"
    message: Message


@dataclass(slots=True)
class ApprovalRequest(Event):
    type: ClassVar[Literal["approval_request"]] = "approval_request"
    tool_calls: list[ToolCall]


@dataclass(slots=True)
class Compaction(Event):
    type: ClassVar[Literal["compaction"]] = "compaction"
    tokens_before: int
    tokens_after: int
    messages_evicted: int
    strategy: str = "summarize"


@dataclass(slots=True)
class StepEnd(Event):
    type: ClassVar[Literal["step_end"]] = "step_end"
    step: int
    usage: Usage
    finish_reason: str | None = None


@dataclass(slots=True)
class RunEnd(Event):
    type: ClassVar[Literal["run_end"]] = "run_end"
    run_id: str
    stop_reason: StopReason
    steps: int
    usage: Usage
    output: str = ""
    error: str | None = None  # what went wrong, for every stop that is not a clean finish
    messages: list[Message] = field(default_factory=list)
    pending_approval: PendingApproval | None = None  # with stop reason requires_approval
    data: Any = None  # the validated answer of a run that asked for an output_type


AnyEvent = (RunStart | StepStart | TextDelta | ReasoningDelta | ToolCallStart | ToolCallDelta
            | ToolCallEnd | ToolExecutionStart | ToolExecutionEnd | MessageEvent
            | ApprovalRequest | Compaction | StepEnd | RunEnd)
"""Every event ``Agent.stream`` yields; ``event.type`` tells which, from ``run_start`` to
``run_end``."""
