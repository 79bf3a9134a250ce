"""What a run of the loop is handed (``LoopConfig``, a paused step to ``Resume``) and the
``Stop`` that ends it with a named reason."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .approvals import Approval, PendingApproval
from .continuation import Continuation, LettaV1
from .events import RunEnd, StopReason
from .hooks import Hooks, StepRecord
from .llm.base import NO_SETTINGS, Model, ModelSettings
from .llm.retry import RetryPolicy
from .messages import Message
from .steering import SteeringQueue
from .tools import Tool

if TYPE_CHECKING:
    from .memory.compaction import ContextManager
    from .tools.rules import ToolRulesSolver


@dataclass(slots=True)
class Resume:
    """A paused step to finish first: its calls, and the human's decision on each."""

    pending: PendingApproval
    decisions: dict[str, Approval]


@dataclass(slots=True)
class LoopConfig:
    """Everything a run needs besides the transcript; built by ``Agent`` for each run."""

    model: Model
    tools: dict[str, Tool]
    build_context: Callable[[list[Message]], list[Message]]  # transcript -> request messages
    continuation: Continuation = field(default_factory=LettaV1)
    hooks: Hooks | None = None
    # These two return an awaitable only when they have to wait (None otherwise), so a step
    # that waits for nothing costs no coroutine; either raises CheckpointError when a step
    # could not be stored, which ends the run.
    checkpoint: Callable[[StepRecord], Awaitable[None] | None] | None = None
    prepare_step: Callable[[], Awaitable[None] | None] | None = None  # re-read shared memory
    # Stores how the run ended (with its last steps); returns the end as stored (a run whose
    # steps could not be stored ends with stop reason "error").
    record_end: Callable[[RunEnd], Awaitable[RunEnd]] | None = None
    max_steps: int = 50
    error_threshold: int | None = 3  # consecutive all-failing tool steps; None: off
    timeout: float | None = None  # whole run, seconds
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_tokens: int | None = None
    parallel_tool_calls: bool = True
    model_settings: ModelSettings = NO_SETTINGS  # temperature, reasoning, response format
    context: ContextManager | None = None  # compaction; None: the window is not managed
    rules: ToolRulesSolver | None = None
    steering: SteeringQueue = field(default_factory=SteeringQueue)
    resume: Resume | None = None
    agent: Any = None  # given to tools that take a ToolContext
    on_end: Callable[[RunEnd], None] | None = None  # sees the RunEnd before it is yielded
    events: bool = True  # False: only RunStart and RunEnd (for callers that want the end)


class Stop(Exception):
    """Why a run ends. Phases return it; it is raised only where an await must unwind (a
    failed model call, a window that cannot be fitted, a cancel noticed mid-call) and by a
    continuation policy that ends the run with a reason of its own (``invalid_output``)."""

    def __init__(self, reason: StopReason, error: str | None = None) -> None:
        self.reason = reason
        self.error = error
