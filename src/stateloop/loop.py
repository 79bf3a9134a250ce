"""The agent loop: call the model, run the tools it asks for, repeat until it answers.

``run_loop`` is a pure async generator of events. It knows no HTTP, SQL or provider:
it is handed a model, tools, a context builder and a checkpoint callback. Whatever
happens — a model failure, a tool failure, a cancel — every tool call it issued is
answered by exactly one result, right after its assistant message, in call order.
The one exception is a step paused for human approval: its calls stay open until
``resume`` answers them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .approvals import Approval, PendingApproval, denial_text
from .cancellation import CancelScope
from .continuation import Continuation, LettaV1
from .eager import shielded
from .errors import CheckpointError, ContextWindowExceeded, InvalidResponse, ModelError
from .events import (
    AnyEvent,
    ApprovalRequest,
    Compaction,
    MessageEvent,
    RunEnd,
    RunStart,
    StepEnd,
    StepStart,
    StopReason,
    ToolCallEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from .hooks import Hooks, StepRecord, call_hook
from .llm.base import Model, ModelRequest, ModelResponse, ToolChoice, ToolSpec
from .llm.retry import RetryPolicy
from .memory.compaction import SystemPromptTooLarge
from .messages import Message, ToolCall, Usage, tool_result, user
from .steering import SteeringQueue
from .tool_calls import CANCELLED_NOTICE, ToolCalls
from .tools import Tool, ToolOutput

if TYPE_CHECKING:
    from .memory.compaction import ContextManager
    from .tools.rules import ToolRulesSolver

LENGTH_CUTOFF_NOTICE = (
    "Your response was cut off by the output token limit before this tool call's arguments "
    "were complete, so it was not executed. Call the tool again with complete arguments "
    "(shorter, if needed).")


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
    # These two return an awaitable only when they have to wait (None otherwise); either
    # raises CheckpointError when a step could not be stored, which ends the run.
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
    context: ContextManager | None = None  # compaction; None: the window is not managed
    rules: ToolRulesSolver | None = None
    steering: SteeringQueue = field(default_factory=SteeringQueue)
    resume: Resume | None = None
    agent: Any = None  # given to tools that take a ToolContext
    on_end: Callable[[RunEnd], None] | None = None  # sees the RunEnd before it is yielded
    events: bool = True  # False: only RunStart and RunEnd (for callers that want the end)


@dataclass(slots=True)
class _Tries:
    """A step's failed model calls: errors since the request was built (each retried after a
    delay), and provider overflows (each answered by a compaction)."""

    errors: int = 0
    overflows: int = 0


class _Stop(Exception):
    """Ends the run with a stop reason; internal to the loop."""

    def __init__(self, reason: StopReason, error: str | None = None) -> None:
        self.reason = reason
        self.error = error


def run_loop(transcript: list[Message], new_input: list[Message], config: LoopConfig, *,
             run_id: str, agent_id: str,
             cancel: CancelScope | None = None) -> AsyncGenerator[AnyEvent, None]:
    """Run the agent on ``new_input``, appending to ``transcript``; yields every event."""
    return _Run(transcript, config, run_id, cancel or CancelScope()).events(new_input, agent_id)


class _Run(ToolCalls):
    """The state of one run; ``step`` is one model call and the tool calls it makes."""

    def __init__(self, transcript: list[Message], config: LoopConfig, run_id: str,
                 scope: CancelScope) -> None:
        self.transcript = transcript
        self.config = config
        self.run_id = run_id
        self.scope = scope
        self.rules = config.rules
        self.added: list[Message] = []
        self.pending: list[Message] = []  # appended since the last checkpoint
        self.usage = Usage()
        self.steps = 0
        self.proceed = config.resume is None
        self.failing_steps = 0
        self.length_cutoffs = 0
        self.open_calls: list[ToolCall] = []  # issued but not yet answered
        self.outputs: list[ToolOutput | None] = []  # their outputs so far, in call order
        self.paused: PendingApproval | None = None
        specs = [tool.spec() for tool in config.tools.values()]
        self.tool_specs: list[ToolSpec] = config.continuation.tool_specs(specs)
        self.tool_names = [spec.name for spec in self.tool_specs]
        self.parallel = config.parallel_tool_calls and not (
            self.rules is not None and self.rules.disables_parallel_calls)

    def append(self, message: Message) -> None:
        self.transcript.append(message)
        self.added.append(message)
        self.pending.append(message)

    # -- the steps -----------------------------------------------------------------------

    async def events(self, new_input: list[Message], agent_id: str
                     ) -> AsyncGenerator[AnyEvent, None]:
        """The whole run as one generator: each generator between the steps and the consumer
        would cost every event a hop. Without ``config.events`` only the run's start and end
        are yielded."""
        config = self.config
        emit = config.events
        self.scope.bind()
        timer = None
        if config.timeout is not None:
            timer = asyncio.get_running_loop().call_later(config.timeout, self.scope.cancel,
                                                          "timeout")
        yield RunStart(self.run_id, agent_id)
        try:
            stop = _Stop("end_turn")
            try:
                if config.resume is not None:
                    async for event in self.resume(config.resume):
                        if emit:
                            yield event
                for message in new_input:
                    self.append(message)
                    self.proceed = True
                    if emit:
                        yield MessageEvent(message)
                while self.proceed:
                    self._check_cancel()
                    for message in config.steering.take_steering():
                        self.append(message)
                        if emit:
                            yield MessageEvent(message)
                    if self.steps >= config.max_steps:
                        raise _Stop("max_steps",
                                    f"stopped after {config.max_steps} steps (max_steps)")
                    if config.prepare_step is not None:
                        waiting = config.prepare_step()
                        if waiting is not None:
                            await waiting
                    started = time.time()
                    step = self.steps + 1
                    if emit:
                        yield StepStart(step)

                    response: ModelResponse | None = None
                    overflow: ContextWindowExceeded | None = None  # the provider's last complaint
                    tries = _Tries()
                    while response is None:
                        if overflow is not None or not self._surely_fits():
                            compaction = await self._fit_window(overflow)
                            if compaction is not None and emit:
                                yield compaction
                        request = self._request()
                        if config.hooks is not None:
                            request = await self._hooked_request(request)
                        tries.errors = 0
                        overflow = None
                        while response is None and overflow is None:
                            stream = config.model.stream(request)
                            try:
                                while True:
                                    self.scope._armed = True
                                    try:
                                        item = await anext(stream)
                                    except StopAsyncIteration:
                                        break
                                    finally:
                                        self.scope._armed = False
                                    if isinstance(item, ModelResponse):
                                        _check_response(item)
                                        response = item
                                    elif emit:
                                        yield item
                                        self._check_cancel()
                            except (asyncio.CancelledError, ModelError) as exc:
                                overflow = await self._model_failed(exc, tries)
                                if overflow is None:
                                    response = None  # a failed call's answer is not used
                            finally:
                                await stream.aclose()  # type: ignore[attr-defined]
                    if config.context is not None:
                        config.context.record_usage(self.transcript, response.usage.input_tokens)
                    if config.hooks and config.hooks.after_model_call:
                        changed = await call_hook(config.hooks.after_model_call, response)
                        response = changed or response
                    self.steps = step
                    self.usage.add(response.usage)
                    calls = response.message.tool_calls
                    if emit:
                        for call in calls:
                            yield ToolCallEnd(call)
                    self.append(response.message)
                    self.open_calls, self.outputs = list(calls), []
                    if emit:
                        yield MessageEvent(response.message)

                    offered = {spec.name for spec in request.tools}
                    cut_off = response.finish_reason == "length"
                    if cut_off and calls:
                        outputs = [ToolOutput(LENGTH_CUTOFF_NOTICE, True) for _ in calls]
                    else:
                        self.paused = self._approval_needed(calls, offered)
                        if self.paused is not None:
                            self.open_calls = []  # they stay open: a human decides
                            if emit:
                                yield ApprovalRequest(self.paused.requested_calls)
                            record = self._record(step, response, started)
                            record.pending_approval = self.paused
                            await self.checkpoint(record)
                            if emit:
                                yield StepEnd(step, response.usage, response.finish_reason)
                            raise _Stop("requires_approval", "waiting for approval of tool calls "
                                        f"{', '.join(self.paused.requested)}")
                        if emit:
                            for call in calls:
                                yield ToolExecutionStart(call)
                        outputs = await self._run_tools(calls, offered, {})
                    results = self._answer(calls, outputs)
                    if emit:
                        for call, result in zip(calls, results, strict=True):
                            yield ToolExecutionEnd(call, result)
                            yield MessageEvent(result)
                    record = await self._end_step(step, response, started)
                    if emit:
                        yield StepEnd(step, record.usage, record.finish_reason)
                    for message in self._next_input(calls, results, cut_off):
                        self.append(message)
                        if emit:
                            yield MessageEvent(message)
            except _Stop as reason:
                stop = reason
            except CheckpointError as exc:
                stop = _Stop("error", str(exc))
            try:
                await self.flush()
            except CheckpointError as exc:
                stop = stop if stop.reason == "error" else _Stop("error", str(exc))
            end = self.end(stop.reason, stop.error)
            if config.record_end is not None:
                end = await config.record_end(end)
            if config.on_end is not None:
                config.on_end(end)
            yield end
        except (asyncio.CancelledError, GeneratorExit):
            # Cancelled from outside (the consumer's task, or the consumer left): answer what
            # is open, persist, and let the cancellation go on.
            self.scope.reason = self.scope.reason or "cancelled"
            self.answer_open_calls()
            try:
                await shielded(self.flush())
            except CheckpointError:
                pass  # the agent goes back to what the store holds when the run is over
            raise
        except BaseException:
            self.answer_open_calls()
            raise
        finally:
            if timer is not None:
                timer.cancel()

    async def resume(self, resume: Resume) -> AsyncGenerator[AnyEvent, None]:
        """Finish a step that paused for approval: run, deny or fill in each of its calls."""
        started = time.time()
        calls = resume.pending.calls
        self.open_calls, self.outputs = list(calls), []
        verdicts: dict[str, ToolOutput] = {}
        for call in calls:
            decision = resume.decisions.get(call.id)
            if decision is None or (decision.approve and decision.result is None):
                continue
            if decision.result is not None:
                verdicts[call.id] = ToolOutput(decision.result, decision.is_error)
                if self.rules is not None:  # the client ran it: rules see its output
                    self.rules.record_call(call.name, decision.result)
            else:
                verdicts[call.id] = ToolOutput(denial_text(decision.reason), True)
        for call in calls:
            yield ToolExecutionStart(call)
        outputs = await self._run_tools(calls, None, verdicts)
        results = self._answer(calls, outputs)
        for call, result in zip(calls, results, strict=True):
            yield ToolExecutionEnd(call, result)
            yield MessageEvent(result)
        record = await self._end_step(0, None, started)
        yield StepEnd(0, record.usage, record.finish_reason)
        for message in self._next_input(calls, results, False):
            self.append(message)
            yield MessageEvent(message)

    def _answer(self, calls: list[ToolCall], outputs: list[ToolOutput]) -> list[Message]:
        """Every call's result, appended before any event about them is yielded: a consumer
        that stops listening midway must not leave a call unanswered."""
        results = [tool_result(call, output.text, is_error=output.is_error)
                   for call, output in zip(calls, outputs, strict=True)]
        for result in results:
            self.append(result)
        self.open_calls = []
        return results

    async def _end_step(self, step: int, response: ModelResponse | None,
                        started: float) -> StepRecord:
        """Persist the step and run the after_step hook."""
        record = self._record(step, response, started)
        waiting = self._checkpoint(record)  # a plain call: this runs at every step
        if waiting is not None:
            await waiting
        if self.config.hooks and self.config.hooks.after_step:
            await call_hook(self.config.hooks.after_step, record)
        return record

    def _next_input(self, calls: list[ToolCall], results: list[Message],
                    cut_off: bool) -> list[Message]:
        """Decide whether the run goes on, and with what input."""
        self._check_cancel()
        if cut_off:
            self.length_cutoffs += 1
            if not calls or self.length_cutoffs > 1:
                raise _Stop("max_tokens_exceeded",
                            "the model's response was cut off by the output token limit")
            return []
        self._count_failures(calls, results)
        return self._decide(calls, results)

    def _count_failures(self, calls: list[ToolCall], results: list[Message]) -> None:
        if calls and all(r.is_error for r in results):
            self.failing_steps += 1
            limit = self.config.error_threshold
            if limit is not None and self.failing_steps >= limit:
                raise _Stop("error_threshold",
                            f"{self.failing_steps} consecutive steps in which every tool call "
                            f"failed; last error: {results[-1].text}")
        else:
            self.failing_steps = 0

    def _decide(self, calls: list[ToolCall], results: list[Message]) -> list[Message]:
        """Set ``proceed``; returns the input the next step starts with."""
        rules, steering = self.rules, self.config.steering
        if rules is not None:
            for call, result in zip(calls, results, strict=True):
                if not result.is_error and rules.is_exit(call.name):
                    raise _Stop("tool_rule", f"{call.name!r} ends the run (exit_loop rule)")
        decision = self.config.continuation.decide(calls, results)
        self.proceed = decision.proceed
        if not self.proceed and calls and rules is not None and (
                any(rules.is_continue(c.name) for c in calls)
                or rules.tool_choice(self.tool_names)[0] == "required"):
            self.proceed = True  # a rule demands the next call, heartbeat or not
        if self.proceed:
            return [decision.inject] if decision.inject is not None else []
        if steering.steering:
            self.proceed = True  # delivered at the next step's start
            return []
        follow_ups = steering.take_follow_ups()
        if follow_ups:
            self.proceed = True
            return follow_ups
        if rules is not None and rules.missing_before_exit(self.tool_names):
            reminder = rules.exit_reminder(self.tool_names)
            if reminder is None:
                missing = ", ".join(rules.missing_before_exit(self.tool_names))
                raise _Stop("tool_rule", f"the model stopped without calling {missing}, "
                            f"which the required_before_exit rule demands")
            self.proceed = True
            return [user(reminder)]
        return []

    async def _model_failed(self, exc: BaseException, tries: _Tries
                            ) -> ContextWindowExceeded | None:
        """After a model call failed: the overflow to compact for, or None to call again
        (after a delay, for a transient error). Raises what ends the run, and a cancel of the
        task itself."""
        if isinstance(exc, asyncio.CancelledError):
            if not self.scope.absorb():
                raise exc
            self._check_cancel()
            return None
        retry = self.config.retry
        if isinstance(exc, ContextWindowExceeded):
            tries.overflows += 1
            if self.config.context is None or tries.overflows > 2:
                raise _Stop("llm_api_error", _describe(exc, 1) + (
                    " (still too long after two compactions)" if tries.overflows > 2
                    else "")) from exc
            return exc  # compact, then build the request again
        assert isinstance(exc, ModelError)
        tries.errors += 1
        if not exc.transient or tries.errors > retry.retries:
            raise _Stop(_stop_reason_for(exc), _describe(exc, tries.errors)) from exc
        await self._sleep(retry.delay(tries.errors, exc.retry_after))
        return None

    # -- the request ---------------------------------------------------------------------

    async def _fit_window(self, overflow: ContextWindowExceeded | None) -> Compaction | None:
        """Compact before the call when the request would not fit (or the provider said
        it did not); the summary is persisted with the step."""
        context = self.config.context
        assert context is not None  # else the request surely fits, and an overflow ends the run
        try:
            if overflow is not None:
                result = await context.compact(self.transcript, self.tool_specs)
            else:
                result = await context.before_call(self.transcript, self.tool_specs)
        except SystemPromptTooLarge as exc:
            raise _Stop("context_window_overflow_in_system_prompt", str(exc)) from exc
        if result is not None:
            self.pending.append(result.summary)
            return result.event
        if overflow is not None:
            raise _Stop("llm_api_error", _describe(overflow, 1) + " (nothing more can be "
                        "moved out of context)")
        return None

    def _surely_fits(self) -> bool:
        """No compaction to consider before this call (``_fit_window`` would do nothing)."""
        context = self.config.context
        return context is None or context.surely_fits(self.transcript, self.tool_specs)

    def _request(self) -> ModelRequest:
        config, rules = self.config, self.rules
        tools, choice, forced = self.tool_specs, "auto", None
        if rules is not None:
            names, choice, forced = rules.next_call(self.tool_names)
            allowed = set(names)
            tools = [spec for spec in tools if spec.name in allowed]
        return ModelRequest(config.build_context(self.transcript), tools, _as_choice(choice),
                            forced, self.parallel, config.max_tokens)

    async def _hooked_request(self, request: ModelRequest) -> ModelRequest:
        """The request as the hooks that see it leave it."""
        hooks = self.config.hooks
        assert hooks is not None
        if hooks.transform_context:
            changed = await call_hook(hooks.transform_context, request.messages)
            if changed is not None:
                request.messages = changed  # this request only: never persisted
        if hooks.before_model_call:
            request = await call_hook(hooks.before_model_call, request) or request
        return request

    # -- cancellation and persistence ----------------------------------------------------

    async def _sleep(self, seconds: float) -> None:
        self.scope._armed = True
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            if not self.scope.absorb():
                raise
        finally:
            self.scope._armed = False
        self._check_cancel()

    def _check_cancel(self) -> None:
        reason = self.scope.reason
        if reason is not None:
            raise _Stop(reason, "the run timed out" if reason == "timeout"
                        else "the run was cancelled")

    def answer_open_calls(self) -> None:
        """Give every issued but unanswered call its result, keeping those already produced."""
        calls, self.open_calls = self.open_calls, []
        outputs = self.outputs if len(self.outputs) == len(calls) else [None] * len(calls)
        for call, output in zip(calls, outputs, strict=True):
            output = output or ToolOutput(CANCELLED_NOTICE, True)
            self.append(tool_result(call, output.text, is_error=output.is_error))

    def _record(self, step: int, response: ModelResponse | None, started: float) -> StepRecord:
        if response is None:
            return StepRecord(self.run_id, step, self.pending, started_at=started,
                              duration=time.time() - started)
        return StepRecord(self.run_id, step, self.pending, response.usage, response.model,
                          response.finish_reason, started, time.time() - started)

    def _checkpoint(self, record: StepRecord) -> Awaitable[None] | None:
        """Hand ``record`` to ``config.checkpoint``: something to await only if it must wait."""
        self.pending = []
        return self.config.checkpoint(record) if self.config.checkpoint is not None else None

    async def checkpoint(self, record: StepRecord) -> None:
        waiting = self._checkpoint(record)
        if waiting is not None:
            await waiting

    async def flush(self) -> None:
        """Persist what no step persisted (input before a failed call, answers at a cancel)."""
        if self.pending:
            await self.checkpoint(StepRecord(self.run_id, 0, self.pending))

    def end(self, reason: StopReason, error: str | None) -> RunEnd:
        output = self.config.continuation.output(self.added)
        return RunEnd(self.run_id, reason, self.steps, self.usage, output,
                      None if reason == "end_turn" else error, self.added, self.paused)


def _as_choice(choice: str) -> ToolChoice:
    return "required" if choice == "required" else "none" if choice == "none" else "auto"


def _check_response(response: ModelResponse) -> None:
    message = response.message
    if not message.content and not message.tool_calls:
        raise InvalidResponse("the model returned an empty response")


def _stop_reason_for(exc: ModelError) -> StopReason:
    return "invalid_llm_response" if isinstance(exc, InvalidResponse) else "llm_api_error"


def _describe(exc: ModelError, attempts: int) -> str:
    prefix = f"{type(exc).__name__}"
    if exc.status_code is not None:
        prefix += f" (HTTP {exc.status_code})"
    if attempts > 1:
        prefix += f" after {attempts} attempts"
    return f"{prefix}: {exc.message}"
