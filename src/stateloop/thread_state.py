"""The state one thread of an agent keeps, as data: what its default thread (``Agent``) and
each ``Conversation`` hold of their own. Everything else a thread reads (model, tools, rules,
system prompt, blocks) is the agent's settings."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .approvals import PendingApproval
    from .cancellation import CancelScope
    from .events import RunEnd
    from .memory.compaction import ContextManager
    from .memory.context import ContextBuilder
    from .messages import Message
    from .persistence import Persistence
    from .run_result import RunResult
    from .steering import SteeringQueue


@dataclasses.dataclass(eq=False)
class ThreadState:
    """One thread's state, field by field.

    The transcript is the in-context list the loop reads and extends; the rest says where a
    thread stands between and during its runs.
    """

    transcript: list[Message]
    """The messages in context, the compiled system prompt first (replaced in place when
    memory changes, so there is one system message however often it does)."""

    steering: SteeringQueue
    """Input given to the run in flight (``steer``) or kept for when it stops
    (``follow_up``)."""

    context: ContextBuilder
    """The request messages prepared from ``transcript``, kept by position between steps."""

    persist: Persistence | None = None
    """Where the thread's steps are written (None: an agent without a store)."""

    pending_approval: PendingApproval | None = None
    """The step paused for a human's approval of some of its tool calls."""

    last_result: RunResult | None = None
    """How the last run of this thread ended."""

    compiled: tuple[Any, ...] | None = None
    """What the system prompt in ``transcript`` was compiled from (None: compile it again)."""

    window: ContextManager | None = None
    """The compaction of this thread's context window, made when first needed."""

    evicted: list[Message] = dataclasses.field(default_factory=list)
    """Messages compacted out of context, kept for recall when there is no store."""

    lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
    """The run lock and the event loop it belongs to: runs of one thread queue on it."""

    scope: CancelScope | None = None
    """The run in flight, to cancel it (None: no run in flight)."""

    resumed: OrderedDict[str, RunEnd] = dataclasses.field(default_factory=OrderedDict)
    """Tool call id -> the end of the run its approval resumed (the last thousand), so the
    same approvals sent again do not run twice."""

    background: set[asyncio.Task[Any]] = dataclasses.field(default_factory=set)
    """Runs started by ``steer``, ``follow_up`` or an approval's timeout, still in flight."""

    stale: bool = False
    """A write failed and what the store holds could not be read yet: read it before the
    next run."""

    @property
    def running(self) -> bool:
        """Whether a run of this thread is in flight."""
        return self.scope is not None
