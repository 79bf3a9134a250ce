"""The model protocol: what the loop needs from any provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
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


@dataclass(slots=True, frozen=True)
class ModelSettings:
    """An agent's sampling settings, sent with each request in the provider's own form;
    ``None`` leaves the model's own. ``response_format`` takes OpenAI's (and Letta's) shapes:
    ``{"type": "text"}``, ``{"type": "json_object"}``,
    ``{"type": "json_schema", "json_schema": {"name": ..., "schema": ..., "strict": ...}}``;
    only models with a JSON mode (``json_schema_output``) take the last two. Reasoning is
    ``reasoning_effort`` for OpenAI's models and ``thinking_budget`` (tokens) for Claude."""

    temperature: float | None = None
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    response_format: dict[str, Any] | None = None


NO_SETTINGS = ModelSettings()


def settings_dict(settings: ModelSettings) -> dict[str, Any]:
    """The settings that are set, as stored."""
    return {name: value for name, value in asdict(settings).items() if value is not None}


def stored_settings(llm_config: dict[str, Any]) -> ModelSettings:
    """The settings an agent's stored ``llm_config`` holds."""
    return ModelSettings(**llm_config.get("model_settings") or {})


@dataclass(slots=True)
class ModelRequest:
    """One model call. ``forced_tool`` names the only tool the model may call, if set."""

    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    forced_tool: str | None = None
    parallel_tool_calls: bool = True
    max_tokens: int | None = None
    settings: ModelSettings = NO_SETTINGS


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
