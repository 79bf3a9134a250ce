"""Reaching a live agent from outside its run: steering, follow-ups and cancel; and the human
approvals a paused run waits for (applying them, denying them, their timeout)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from . import agent_options as options
from .agent_state import AgentState
from .approvals import Approval, ApprovalError, PendingApproval, denial_text
from .events import RunEnd
from .loop import CANCELLED_NOTICE, Resume
from .messages import Message, tool_result, user
from .run_result import RunResult
from .steering import SteerMode
from .surrogates import check

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .agent_options import Input
    from .llm.base import Model
    from .sleeptime import Sleeptime


# What a run resumed by results already answered is sent (Letta's words), and how far back
# in context those answers are looked for.
KEEP_ALIVE = ("<system-alert>Automated keep-alive ping. Ignore this message and continue "
              "from where you stopped.</system-alert>")
RECENT = 10


class AgentControl(AgentState):
    """``steer``, ``follow_up``, ``cancel``; pending approvals, from request to resume."""

    approval_timeout: float | None
    sleeptime: Sleeptime | None

    if TYPE_CHECKING:
        async def run(self, input: Input = None, *,
                      approvals: Sequence[Approval] | None = None, max_steps: int | None = None,
                      model: str | Model | None = None) -> RunResult: ...

    def steer(self, text: str | Message, mode: SteerMode = "after_batch"
              ) -> asyncio.Task[RunResult] | None:
        """Deliver input to the run in flight before its next model call.

        ``mode="interrupt"`` skips the calls of the current batch that have not started.
        An idle agent starts a run (returned as a task).
        """
        message = options.as_messages(text)[0]
        check(message.text, "steering text")
        if self.running:
            self.state.steering.steer(message, mode)
            return None
        return self._start_background(message)

    def follow_up(self, text: str | Message) -> asyncio.Task[RunResult] | None:
        """Queue input for when the run in flight would otherwise stop (idle: start a run)."""
        message = options.as_messages(text)[0]
        check(message.text, "follow-up text")
        if self.running:
            self.state.steering.follow_ups.append(message)
            return None
        return self._start_background(message)

    def cancel(self) -> None:
        """Stop the run in flight with stop reason ``cancelled``, or deny a pending approval.

        Safe to call from any thread while a run is in flight.
        """
        scope = self.state.scope
        if scope is not None:
            scope.cancel()
        elif self.state.pending_approval is not None:
            self._answer_pending("the run was cancelled")

    def _take_pending(self, new_input: list[Message],
                      approvals: list[Approval]) -> Resume | RunEnd | None:
        """What the run must finish first: approvals applied to the pending step, a timed-out
        approval denied, or (for approvals already applied) the earlier result."""
        pending = self.state.pending_approval
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
        if self.approval_timeout is not None and (
                time.time() - pending.created_at >= self.approval_timeout):
            reason = f"no approval within {self.approval_timeout:g} s"
            approvals = [Approval(i, approve=False, reason=reason) for i in pending.requested]
        elif not approvals:
            raise ApprovalError(
                f"agent {self.name!r} is waiting for approval of tool calls "
                f"{', '.join(pending.requested)}; send approvals=[...] or cancel()"
                + (" before sending a new message" if new_input else ""))
        decisions = pending.check(approvals)
        self.state.pending_approval = None
        return Resume(pending, decisions)

    def _after_run(self, end: RunEnd, resume: Resume | None) -> None:
        self.state.last_result = RunResult.from_event(end)
        if self.sleeptime is not None:  # counts the turn; may start the memory agent
            self.sleeptime.after_turn(end)
        self.state.pending_approval = end.pending_approval
        self.recall_count += len(end.messages)
        if (self.agent_type.clear_after_run and end.pending_approval is None
                and self.state.persist is None):  # else cleared as the run's end is stored
            self.state.transcript[1:] = []
        if resume is not None:
            for call_id in resume.decisions:
                self.state.resumed[call_id] = end
            while len(self.state.resumed) > 1000:
                self.state.resumed.popitem(last=False)
        if end.pending_approval is not None and self.approval_timeout is not None:
            asyncio.get_running_loop().call_later(self.approval_timeout, self._expire,
                                                  end.pending_approval)

    def _expire(self, pending: PendingApproval) -> None:
        if self.state.pending_approval is pending:
            self._start_background(None)  # the run denies the timed-out calls, then goes on

    def _answered(self, approvals: Sequence[Approval]) -> bool:
        """Whether each of these calls has its result among the last messages in context."""
        answered = {m.tool_call_id for m in self.state.transcript[-RECENT:] if m.role == "tool"}
        return all(a.tool_call_id in answered for a in approvals)

    def _answer_pending(self, reason: str) -> None:
        """Deny the pending calls (the others are cancelled) without running the model."""
        pending, self.state.pending_approval = self.state.pending_approval, None
        assert pending is not None
        for call in pending.calls:
            text = denial_text(reason) if call.id in pending.requested else CANCELLED_NOTICE
            self.storage.append_outside_run(tool_result(call, text, is_error=True))

    def _start_background(self, message: Message | None) -> asyncio.Task[RunResult]:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("an idle agent starts a run here, which needs a running event "
                               "loop; use 'await agent.run(...)' or run_sync()") from None
        task = loop.create_task(self.run(message))
        self.state.background.add(task)
        task.add_done_callback(self.state.background.discard)
        return task
