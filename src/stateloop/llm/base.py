"""The model protocol: what the loop needs from any provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..events import ReasoningDelta, TextDelta, ToolCallDelta, ToolCallStart
from ..messages import Message, Usage

ToolChoice = Literal["auto", "required", "none"]


@dataclass(slots=True)
class ToolSpec:
    """A tool as a model sees it: name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(slots=True)
class ModelRequest:
    """One model call. ``forced_tool`` names the only tool the model may call, if set."""

    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    forced_tool: str | None = None
    parallel_tool_calls: bool = True
    max_tokens: int | None = None


@dataclass(slots=True)
class ModelResponse:
    """The assembled result of one model call; the last item of ``Model.stream``."""

    message: Message  # role "assistant"
    usage: Usage
    finish_reason: str | None = None  # "stop", "tool_calls", "length", ... as the provider said
    model: str | None = None


StreamItem = TextDelta | ReasoningDelta | ToolCallStart | ToolCallDelta | ModelResponse


@runtime_checkable
class Model(Protocol):
    """A chat model. ``stream`` yields deltas as they arrive and a ``ModelResponse`` last.

    Failures are raised as ``stateloop.errors.ModelError`` subclasses.
    """

    name: str
    context_window: int
    max_output_tokens: int | None

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]: ...
