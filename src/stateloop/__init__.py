"""stateloop: a small, exact runtime for stateful LLM agents."""

from .agent import Agent
from .approvals import Approval, ApprovalError
from .errors import (
    ConfigError,
    InputTooLarge,
    ModelError,
    StateloopError,
    ToolDefinitionError,
)
from .events import AnyEvent, Event, StopReason
from .hooks import Blocked, Hooks, StepRecord
from .mcp import MCPTools
from .memory.blocks import Block
from .messages import Message, ToolCall, Usage
from .run_result import RunResult
from .schedules import Schedules
from .tools import Tool, ToolContext, ToolOutput, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AnyEvent",
    "Approval",
    "ApprovalError",
    "Block",
    "Blocked",
    "ConfigError",
    "Event",
    "Hooks",
    "InputTooLarge",
    "MCPTools",
    "Message",
    "ModelError",
    "RunResult",
    "Schedules",
    "StateloopError",
    "StepRecord",
    "StopReason",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolOutput",
    "Usage",
    "tool",
]
