"""Hooks: user code that observes or steers the loop at fixed points of every step."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .approvals import PendingApproval
from .events import Compaction
from .messages import Message, Usage


@dataclass(slots=True)
class Blocked:
    """Returned by ``before_tool_call`` to refuse a call; the model is told ``reason``."""

    reason: str


@dataclass(slots=True)
class StepRecord:
    """One finished step: what ``after_step`` hooks and the checkpoint callback receive."""

    run_id: str
    step: int  # 0 for messages written outside a step (e.g. answers given at a cancel)
    messages: list[Message]  # messages appended since the previous checkpoint
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    finish_reason: str | None = None
    started_at: float = 0.0
    duration: float = 0.0
    pending_approval: PendingApproval | None = None  # the step paused for a human
    timing: StepTiming | None = None  # where the step's time went (None: no model call)
    trace_id: str | None = None  # the run's OpenTelemetry trace (32 hex digits), when traced
    # Once the step's write committed, when its commit began and ended (ns); set by the store.
    commit_times: Callable[[], tuple[int, int] | None] | None = None


@dataclass(slots=True)
class StepTiming:
    """Where a step's time went, in nanoseconds: its model call (every try, retries and
    their waits included) from its start on the wall clock, the first streamed chunk, and its
    tool calls (all of them, as the step waited for them; each call's own start and end on the
    wall clock)."""

    llm_request_start_ns: int
    llm_request_ns: int
    time_to_first_token_ns: int
    tool_execution_ns: int = 0
    tool_calls: dict[str, tuple[int, int]] = field(default_factory=dict)  # id: (start, end)
    model_call: bool = True  # False: tool calls resumed after an approval, no model call
    # Compactions before the call, each (start, end, what it did) on the wall clock.
    compactions: list[tuple[int, int, Compaction]] = field(default_factory=list)


@dataclass(slots=True)
class QueueWait:
    """How long a run waited for its thread's turn (the runs ahead of it to end), in
    seconds; on a store several processes share, whether its turn came only after another
    run's (None on a store of one process)."""

    seconds: float
    fleet_waited: bool | None = None


@dataclass(slots=True)
class Hooks:
    """Callables, sync or async, each optional.

    - ``before_model_call(request)``: may change the request or return a new one.
    - ``after_model_call(response)``: sees the assembled response.
    - ``before_tool_call(call, arguments)``: return ``None`` to go on, a dict to replace the
      arguments, or ``Blocked(reason)`` to refuse the call.
    - ``after_tool_call(call, output)``: return ``None``, a new ``ToolOutput`` or a string.
    - ``after_step(record)``: after every step, the last one included.
    - ``transform_context(messages)``: sees the request's messages before each model call
      and may return a new list (a transient note, say); what it adds is never persisted.

    ``before_model_call`` may also change ``request.tools``: a call to a tool that was not
    offered is refused with an error naming the ones that were.
    """

    before_model_call: Callable[..., Any] | None = None
    after_model_call: Callable[..., Any] | None = None
    before_tool_call: Callable[..., Any] | None = None
    after_tool_call: Callable[..., Any] | None = None
    after_step: Callable[..., Any] | None = None
    transform_context: Callable[..., Any] | None = None


async def call_hook(hook: Callable[..., Any], *args: Any) -> Any:
    """Call a sync or async hook and return its result."""
    result = hook(*args)
    if inspect.isawaitable(result):
        result = await result
    return result
