"""The agent loop: call the model, run the tools it asks for, repeat until it answers.

``run_loop`` is a pure async generator of events. It knows no HTTP, SQL or provider:
it is handed a model, tools, a context builder and a checkpoint callback. Whatever
happens — a model failure, a tool failure, a cancel — every tool call it issued is
answered by exactly one result, right after its assistant message, in call order.
The one exception is a step paused for human approval: its calls stay open until the
next run resumes it.

``_Run.events`` is the table of contents: each phase is a method that returns data (a
stop, too), and the generator yields the phase's events between them. The model call lives
in ``model_call.py``, the tool calls in ``tool_calls.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable
from dataclasses import dataclass
from typing import Any

from .approvals import PendingApproval, denial_text
from .cancellation import CancelScope
from .eager import shielded
from .errors import CheckpointError
from .events import (
    AnyEvent,
    ApprovalRequest,
    MessageEvent,
    RunEnd,
    RunStart,
    StepEnd,
    StepStart,
    ToolCallEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from .hooks import StepRecord, StepTiming, call_hook
from .llm.base import ModelRequest, ModelResponse, ToolSpec
from .loop_config import LoopConfig, Resume, Stop
from .messages import Message, ToolCall, Usage, new_id, user
from .model_call import Attempt, ModelCalls
from .tool_calls import CANCELLED_NOTICE, ToolCalls
from .tools import ToolOutput

__all__ = ["CANCELLED_NOTICE", "LENGTH_CUTOFF_NOTICE", "LoopConfig", "Resume", "first_request",
           "run_loop"]

LENGTH_CUTOFF_NOTICE = (
    "Your response was cut off by the output token limit before this tool call's arguments "
    "were complete, so it was not executed. Call the tool again with complete arguments "
    "(shorter, if needed).")


def run_loop(transcript: list[Message], new_input: list[Message], config: LoopConfig, *,
             run_id: str, agent_id: str,
             cancel: CancelScope | None = None) -> AsyncGenerator[AnyEvent, None]:
    """Run the agent on ``new_input``, appending to ``transcript``; yields every event."""
    return _Run(transcript, new_input, config, run_id, cancel or CancelScope()).events(agent_id)


def first_request(messages: list[Message], config: LoopConfig) -> ModelRequest:
    """The request a run's first step would send after ``messages`` (tools and rules as the
    run applies them, hooks not called); nothing is run or changed."""
    return _Run(messages, [], config, "preview", CancelScope())._request()


@dataclass(slots=True)
class _Step:
    """One model call and the tool calls it made; number 0 is a paused step, resumed."""

    number: int
    started: float
    calls: list[ToolCall]
    response: ModelResponse | None = None
    offered: set[str] | None = None  # the tools its request offered (None: not checked)
    answered: dict[str, ToolOutput] | None = None  # calls answered without running
    cut_off: bool = False  # the response hit the output token limit
    paused: PendingApproval | None = None  # its calls wait for a human
    # A resumed step: the human's decision on each call, kept in its result's metadata
    # under "approval" ({"approve", "reason", "client": the client ran it}).
    decisions: dict[str, dict[str, Any]] | None = None
    timing: StepTiming | None = None  # None: no model call (a resumed step)


class _Run(ModelCalls, ToolCalls):
    """The state of one run."""

    def __init__(self, transcript: list[Message], new_input: list[Message],
                 config: LoopConfig, run_id: str, scope: CancelScope) -> None:
        self.transcript = transcript
        self.config = config
        self.run_id = run_id
        self.scope = scope
        self.rules = config.rules
        self.step_events = config.events
        self.new_input = list(new_input)  # appended when the first model step opens
        self.added: list[Message] = []
        self.unsaved: list[Message] = []  # appended since the last save
        self.usage = Usage()
        self.steps = 0
        self.failing_steps = 0
        self.length_cutoffs = 0
        self.open_calls: list[ToolCall] = []  # issued but not yet answered
        self.outputs: list[ToolOutput | None] = []  # their outputs so far, in call order
        self.call_times: dict[str, tuple[int, int]] = {}  # the step's calls run: (start, end)
        self.paused: PendingApproval | None = None
        specs = [tool.spec() for tool in config.tools.values()]
        self.tool_specs: list[ToolSpec] = config.continuation.tool_specs(specs)
        self.tool_names = [spec.name for spec in self.tool_specs]
        self.parallel = config.parallel_tool_calls and not (
            self.rules is not None and self.rules.disables_parallel_calls)

    def append(self, message: Message) -> None:
        self.transcript.append(message)
        self.added.append(message)
        self.unsaved.append(message)

    async def events(self, agent_id: str) -> AsyncGenerator[AnyEvent, None]:
        """The run, phase by phase: open a step, call the model, accept its response, run
        the tools, end the step, go on or stop. One generator: another between the steps and
        the consumer would cost every event a hop. Without ``config.events`` only the run's
        start and end are yielded; each phase's events sit behind one check, as making and
        yielding events nobody reads costs a ``run()`` microseconds a step."""
        config, step_events = self.config, self.step_events
        timer = self._start_clock()
        yield RunStart(self.run_id, agent_id)
        stop: Stop
        try:
            step = self._resumed_step(config.resume) if config.resume is not None else None
            while True:
                if step is None:  # a resumed step goes straight to its tools
                    # Open the step: the new input, steering; a cancel or max_steps stops.
                    opened, reached = self._open_step()
                    if step_events:
                        for message in opened:
                            yield MessageEvent(message)
                    if reached is not None:
                        stop = reached
                        break
                    if config.prepare_step is not None and (
                            waiting := config.prepare_step()) is not None:
                        await waiting
                    number, started, reply_id = self.steps + 1, time.time(), new_id("message")
                    if step_events:
                        yield StepStart(number, reply_id)

                    # Call the model: compact if the request would not fit, retry what fails.
                    attempt = Attempt()
                    while attempt.response is None:
                        if attempt.request is None and not self._fits(attempt):
                            began = time.time_ns()
                            compaction = await self._fit_window(attempt)
                            if compaction is not None:
                                attempt.compactions.append((began, time.time_ns(), compaction))
                                if step_events:
                                    yield compaction
                        if attempt.request is None:
                            attempt.request = self._request()
                            if config.hooks is not None:
                                attempt.request = await self._hooked_request(attempt.request)
                        if not attempt.started_ns:
                            attempt.started_ns = time.time_ns()
                        stream = config.model.stream(attempt.request)
                        try:
                            while (delta := await self._next_chunk(stream, attempt)) is not None:
                                yield delta
                                self._check_cancel()
                        finally:
                            await stream.aclose()  # type: ignore[attr-defined]

                    # Accept the response: append it, open its calls, decide on approvals.
                    response, answered_ns = attempt.response, time.time_ns()
                    if config.hooks is not None:
                        response = await self._hooked_response(response)
                    if step_events:
                        for call in response.message.tool_calls:
                            yield ToolCallEnd(call)
                    step = self._accept(number, started, response, attempt.request, reply_id)
                    step.timing = StepTiming(attempt.started_ns, answered_ns - attempt.started_ns,
                                             attempt.first_chunk_ns - attempt.started_ns,
                                             compactions=attempt.compactions)
                    if step_events:
                        yield MessageEvent(response.message)

                # Run the tools unless a human decides first, answering every call.
                calls, results = step.calls, []
                if step.paused is not None:
                    if step_events:
                        yield ApprovalRequest(step.paused.requested_calls)
                else:
                    if step_events and not step.cut_off:
                        for call in calls:
                            yield ToolExecutionStart(call)
                    tools_started = time.perf_counter_ns()
                    outputs = await self._run_tools(calls, step.offered, step.answered)
                    if calls:
                        if step.timing is None:  # resumed after an approval: no model call
                            step.timing = StepTiming(0, 0, 0, model_call=False)
                        step.timing.tool_execution_ns = time.perf_counter_ns() - tools_started
                        step.timing.tool_calls, self.call_times = self.call_times, {}
                    results = self._answer(calls, outputs)
                    if step.decisions:
                        for result in results:
                            if result.tool_call_id in step.decisions:
                                result.metadata["approval"] = step.decisions[result.tool_call_id]
                    if step_events:
                        for call, result in zip(calls, results, strict=True):
                            yield ToolExecutionEnd(call, result)
                            yield MessageEvent(result)

                # End the step in one place, then go on with the next step's input, or stop.
                record = await self._end_step(step)
                if step_events:
                    yield StepEnd(step.number, record.usage, record.finish_reason)
                decision = self._after_step(step, results)
                if isinstance(decision, Stop):
                    stop = decision
                    break
                if step_events:
                    for message in decision:
                        yield MessageEvent(message)
                step = None
        except Stop as raised:  # from an await that had to unwind: see Stop
            stop = raised
        except CheckpointError as exc:
            stop = Stop("error", str(exc))
        except (asyncio.CancelledError, GeneratorExit):
            await self._cancelled()
            raise
        except BaseException:
            self.answer_open_calls()
            raise
        finally:
            if timer is not None:
                timer.cancel()
        try:
            end = await self._finish(stop)
        except asyncio.CancelledError:
            await self._cancelled()
            raise
        yield end

    # -- the phases ----------------------------------------------------------------------

    def _start_clock(self) -> asyncio.TimerHandle | None:
        """Bind the cancel scope to this task; start the run's timeout, if any."""
        self.scope.bind()
        timeout = self.config.timeout
        return None if timeout is None else asyncio.get_running_loop().call_later(
            timeout, self.scope.cancel, "timeout")

    def _resumed_step(self, resume: Resume) -> _Step:
        """A step paused for approval, finished first: the human's verdicts answer calls
        (denied, or run by the client); the approved ones run."""
        answered: dict[str, ToolOutput] = {}
        step = _Step(0, time.time(), resume.pending.calls, answered=answered, decisions={
            call_id: {"approve": d.approve, "reason": d.reason, "client": d.result is not None}
            for call_id, d in resume.decisions.items()})
        self.open_calls, self.outputs = list(step.calls), []
        for call in step.calls:
            decision = resume.decisions.get(call.id)
            if decision is None or (decision.approve and decision.result is None):
                continue
            if decision.result is not None:
                answered[call.id] = ToolOutput(decision.result, decision.is_error)
                if self.rules is not None:  # the client ran it: rules see its output
                    self.rules.record_call(call.name, decision.result)
            else:
                answered[call.id] = ToolOutput(denial_text(decision.reason), True)
        return step

    def _open_step(self) -> tuple[list[Message], Stop | None]:
        """The messages a step starts with, appended: the run's new input (at its first model
        step), then steering. With them, the stop if the step may not run."""
        opened, self.new_input = self.new_input, []
        for message in opened:
            self.append(message)
        stop = self._cancel_stop()
        if stop is not None:
            return opened, stop
        for message in self.config.steering.take_steering():
            self.append(message)
            opened.append(message)
        if self.steps >= self.config.max_steps:
            return opened, Stop("max_steps", f"stopped after {self.config.max_steps} steps "
                                "(max_steps)")
        return opened, None

    def _accept(self, number: int, started: float, response: ModelResponse,
                request: ModelRequest | None, reply_id: str) -> _Step:
        """Count the step, append the response, open its calls. Calls cut off by the output
        limit are answered with a notice; calls a human must approve pause the step."""
        self.steps, response.message.id = number, reply_id
        self.usage.add(response.usage)
        calls = response.message.tool_calls
        step = _Step(number, started, calls, response, cut_off=response.finish_reason == "length")
        self.append(response.message)
        self.open_calls, self.outputs = list(calls), []
        if step.cut_off and calls:
            step.answered = {call.id: ToolOutput(LENGTH_CUTOFF_NOTICE, True) for call in calls}
            return step
        assert request is not None
        step.offered = {spec.name for spec in request.tools}
        self.paused = step.paused = self._approval_needed(calls, step.offered)
        if step.paused is not None:
            self.open_calls = []  # they stay open: a human decides
        return step

    async def _end_step(self, step: _Step) -> StepRecord:
        """Save the step (a paused one with its pending approval); run after_step if it is over."""
        record = self._record(step.number, step.response, step.started)
        record.timing = step.timing
        record.pending_approval = step.paused
        waiting = self._save_step(record)
        if waiting is not None:
            await waiting
        hooks = self.config.hooks
        if hooks is not None and hooks.after_step and step.paused is None:
            await call_hook(hooks.after_step, record)
        return record

    def _after_step(self, step: _Step, results: list[Message]) -> list[Message] | Stop:
        """Go on or stop, checked in order. Going on, returns the messages the next step
        starts with, appended."""
        if step.paused is not None:
            return Stop("requires_approval", "waiting for approval of tool calls "
                        f"{', '.join(step.paused.requested)}")
        calls = step.calls
        stop = self._cancel_stop() or self._limit_reached(step, calls, results)
        if stop is not None:
            return stop
        if step.cut_off:
            return []  # the model calls again, with complete arguments
        rules = self.rules
        decision = self.config.continuation.decide(calls, results)
        if decision.proceed or (calls and rules is not None and (  # a rule demands a call
                any(rules.is_continue(c.name) for c in calls)
                or rules.tool_choice(self.tool_names)[0] == "required")):
            return self._added([decision.inject] if decision.inject is not None else [])
        steering = self.config.steering
        if steering.steering:
            return []  # delivered when the next step opens
        follow_ups = steering.take_follow_ups()
        if follow_ups:
            return self._added(follow_ups)
        if rules is not None and rules.missing_before_exit(self.tool_names):
            reminder = rules.exit_reminder(self.tool_names)
            if reminder is None:
                missing = ", ".join(rules.missing_before_exit(self.tool_names))
                return Stop("tool_rule", f"the model stopped without calling {missing}, "
                            "which the required_before_exit rule demands")
            return self._added([user(reminder)])
        if self.new_input:
            return []  # the step was resumed, and the run has new input
        return Stop("end_turn")

    def _limit_reached(self, step: _Step, calls: list[ToolCall],
                       results: list[Message]) -> Stop | None:
        """A second cut-off (or one without calls), too many failing steps, an exit rule."""
        if step.cut_off:
            self.length_cutoffs += 1
            if not calls or self.length_cutoffs > 1:
                return Stop("max_tokens_exceeded",
                            "the model's response was cut off by the output token limit")
            return None
        if calls and all(r.is_error for r in results):
            self.failing_steps += 1
            limit = self.config.error_threshold
            if limit is not None and self.failing_steps >= limit:
                return Stop("error_threshold",
                            f"{self.failing_steps} consecutive steps in which every tool call "
                            f"failed; last error: {results[-1].text}")
        else:
            self.failing_steps = 0
        if self.rules is not None:
            for call, result in zip(calls, results, strict=True):
                if not result.is_error and self.rules.is_exit(call.name):
                    return Stop("tool_rule", f"{call.name!r} ends the run (exit_loop rule)")
        return None

    def _added(self, messages: list[Message]) -> list[Message]:
        for message in messages:
            self.append(message)
        return messages

    # -- saving and ending ---------------------------------------------------------------

    def _record(self, step: int, response: ModelResponse | None, started: float) -> StepRecord:
        if response is None:
            return StepRecord(self.run_id, step, self.unsaved, started_at=started,
                              duration=time.time() - started)
        return StepRecord(self.run_id, step, self.unsaved, response.usage, response.model,
                          response.finish_reason, started, time.time() - started)

    def _save_step(self, record: StepRecord) -> Awaitable[None] | None:
        """Hand ``record`` to ``config.checkpoint``: something to await only if it must wait
        (a plain call: this runs at every step)."""
        self.unsaved = []
        return self.config.checkpoint(record) if self.config.checkpoint is not None else None

    async def _save_leftovers(self) -> None:
        """Save what no step saved (input before a failed call, answers at a cancel)."""
        if self.unsaved:
            waiting = self._save_step(StepRecord(self.run_id, 0, self.unsaved))
            if waiting is not None:
                await waiting

    async def _finish(self, stop: Stop) -> RunEnd:
        """Save what is left, then the run's end (stored, and shown to ``on_end``)."""
        config = self.config
        try:
            await self._save_leftovers()
        except CheckpointError as exc:
            stop = stop if stop.reason == "error" else Stop("error", str(exc))
        output = config.continuation.output(self.added)
        end = RunEnd(self.run_id, stop.reason, self.steps, self.usage, output,
                     None if stop.reason == "end_turn" else stop.error, self.added, self.paused)
        if config.record_end is not None:
            end = await config.record_end(end)
        if config.on_end is not None:
            config.on_end(end)
        return end

    async def _cancelled(self) -> None:
        """Cancelled from outside (the consumer's task, or the consumer left): answer what is
        open and save it, before the cancellation goes on."""
        self.scope.reason = self.scope.reason or "cancelled"
        self.answer_open_calls()
        try:
            await shielded(self._save_leftovers())
        except CheckpointError:
            pass  # the agent goes back to what the store holds when the run is over
