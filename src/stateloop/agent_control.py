"""Facing a live run of one thread: steering it (``steer``, ``follow_up``) and cancelling
it; the human approvals a paused run waits for (applying them, denying them, their
timeout); and what a run's end leaves on the thread.

``ThreadControl`` is held by each thread (``thread.control``). It writes the thread's
``ThreadState``, reads the settings named by ``ControlSettings``, and starts background runs
with the ``run`` it is given."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from . import agent_options as options
from .approvals import Approval, ApprovalError, PendingApproval, denial_text
from .events import RunEnd
from .loop import CANCELLED_NOTICE, Resume
from .messages import Message, tool_result, user
from .run_result import RunResult
from .steering import SteerMode
from .surrogates import check

if TYPE_CHECKING:
    from .agent_store import ThreadStorage
    from .agent_types import AgentType
    from .sleeptime import Sleeptime
    from .thread_state import ThreadState

# What a run resumed by results already answered is sent (Letta's words), and how far back
# in context those answers are looked for.
KEEP_ALIVE = ("<system-alert>Automated keep-alive ping. Ignore this message and continue "
              "from where you stopped.</system-alert>")
RECENT = 10

StartRun = Callable[[Message | None], Coroutine[Any, Any, RunResult]]


class ControlSettings(Protocol):
    """What a thread's control reads of its thread (and the message count it adds to)."""

    @property
    def name(self) -> str: ...
    @property
    def approval_timeout(self) -> float | None: ...
    @property
    def agent_type(self) -> AgentType: ...
    @property
    def sleeptime(self) -> Sleeptime | None: ...
    recall_count: int


class ThreadControl:
    """``steer``, ``follow_up``, ``cancel``; pending approvals, from request to resume."""

    def __init__(self, thread: ControlSettings, state: ThreadState, storage: ThreadStorage,
                 run: StartRun) -> None:
        self.thread = thread
        self.state = state
        self.storage = storage
        self.run = run  # starts a run of the thread with one message (or none)

    def steer(self, text: str | Message, mode: SteerMode = "after_batch"
              ) -> asyncio.Task[RunResult] | None:
        """Deliver input to the run in flight before its next model call (idle: start a
        run, returned as a task)."""
        message = options.as_messages(text)[0]
        check(message.text, "steering text")
        if self.state.running:
            self.state.steering.steer(message, mode)
            return None
        return self.start_background(message)

    def follow_up(self, text: str | Message) -> asyncio.Task[RunResult] | None:
        """Queue input for when the run in flight would otherwise stop (idle: start a run)."""
        message = options.as_messages(text)[0]
        check(message.text, "follow-up text")
        if self.state.running:
            self.state.steering.follow_ups.append(message)
            return None
        return self.start_background(message)

    def cancel(self) -> None:
        """Stop the run in flight, or deny a pending approval."""
        scope = self.state.scope
        if scope is not None:
            scope.cancel()
        elif self.state.pending_approval is not None:
            self.answer_pending("the run was cancelled")

    def take_pending(self, new_input: list[Message],
                     approvals: list[Approval]) -> Resume | RunEnd | None:
        """What the run must finish first: approvals applied to the pending step, a timed-out
        approval denied, or (for approvals already applied) the earlier result."""
        pending = self.state.pending_approval
        timeout = self.thread.approval_timeout
        if pending is None:
            if not approvals:
                return None
            ends = [self.state.resumed.get(a.tool_call_id) for a in approvals]
            first = ends[0]
            if first is not None and all(end is first for end in ends):
                return first  # the same approvals again: nothing runs twice
            if self._answered(approvals):
                # As in Letta: results for calls answered already (denied by a cancel, say)
                # are a retry; the run goes on from where it stopped.
                if not new_input:
                    new_input.append(user(KEEP_ALIVE))
                return None
            raise ApprovalError("no tool call is awaiting approval")
        if timeout is not None and time.time() - pending.created_at >= timeout:
            reason = f"no approval within {timeout:g} s"
            approvals = [Approval(i, approve=False, reason=reason) for i in pending.requested]
        elif not approvals:
            raise ApprovalError(
                f"agent {self.thread.name!r} is waiting for approval of tool calls "
                f"{', '.join(pending.requested)}; send approvals=[...] or cancel()"
                + (" before sending a new message" if new_input else ""))
        decisions = pending.check(approvals)
        self.state.pending_approval = None
        return Resume(pending, decisions)

    def after_run(self, end: RunEnd, resume: Resume | None) -> None:
        """What a run's end leaves: its result, a pending approval (and its timer), the
        message count, the memory agent's turn."""
        state = self.state
        state.last_result = RunResult.from_event(end)
        sleeptime = self.thread.sleeptime
        if sleeptime is not None:  # counts the turn; may start the memory agent
            sleeptime.after_turn(end)
        state.pending_approval = end.pending_approval
        self.thread.recall_count += len(end.messages)
        if (self.thread.agent_type.clear_after_run and end.pending_approval is None
                and state.persist is None):  # else cleared as the run's end is stored
            state.transcript[1:] = []
        if resume is not None:
            for call_id in resume.decisions:
                state.resumed[call_id] = end
            while len(state.resumed) > 1000:
                state.resumed.popitem(last=False)
        timeout = self.thread.approval_timeout
        if end.pending_approval is not None and timeout is not None:
            asyncio.get_running_loop().call_later(timeout, self._expire, end.pending_approval)

    def _expire(self, pending: PendingApproval) -> None:
        if self.state.pending_approval is pending:
            self.start_background(None)  # the run denies the timed-out calls, then goes on

    def _answered(self, approvals: list[Approval]) -> bool:
        """Whether each of these calls has its result among the last messages in context."""
        answered = {m.tool_call_id for m in self.state.transcript[-RECENT:] if m.role == "tool"}
        return all(a.tool_call_id in answered for a in approvals)

    def answer_pending(self, reason: str) -> None:
        """Deny the pending calls (the others are cancelled) without running the model."""
        pending, self.state.pending_approval = self.state.pending_approval, None
        assert pending is not None
        for call in pending.calls:
            text = denial_text(reason) if call.id in pending.requested else CANCELLED_NOTICE
            self.storage.append_outside_run(tool_result(call, text, is_error=True))

    def start_background(self, message: Message | None) -> asyncio.Task[RunResult]:
        """A run of the thread started as a task (by steering an idle thread, or a timeout)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("an idle agent starts a run here, which needs a running event "
                               "loop; use 'await agent.run(...)' or run_sync()") from None
        task = loop.create_task(self.run(message))
        self.state.background.add(task)
        task.add_done_callback(self.state.background.discard)
        return task
