"""The agent loop: call the model, run the tools it asks for, repeat until it answers.

``run_loop`` is a pure async generator of events. It knows no HTTP, SQL or provider:
it is handed a model, tools, a context builder and a checkpoint callback. Whatever
happens — a model failure, a tool failure, a cancel — every tool call it issued is
answered by exactly one result, right after its assistant message, in call order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .continuation import Continuation, LettaV1
from .errors import InvalidResponse, ModelError
from .events import (
    Event,
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
from .hooks import Blocked, Hooks, StepRecord, call_hook
from .llm.base import Model, ModelRequest, ModelResponse, ToolSpec
from .llm.retry import RetryPolicy
from .messages import Message, ToolCall, Usage, tool_result
from .tools import Tool, ToolOutput, execute_tool

LENGTH_CUTOFF_NOTICE = (
    "Your response was cut off by the output token limit before this tool call's arguments "
    "were complete, so it was not executed. Call the tool again with complete arguments "
    "(shorter, if needed).")
CANCELLED_NOTICE = "Tool call was cancelled before it finished."


@dataclass(slots=True)
class LoopConfig:
    """Everything a run needs besides the transcript; built by ``Agent`` for each run."""

    model: Model
    tools: dict[str, Tool]
    build_context: Callable[[list[Message]], list[Message]]  # transcript -> request messages
    continuation: Continuation = field(default_factory=LettaV1)
    hooks: Hooks | None = None
    checkpoint: Callable[[StepRecord], Awaitable[None]] | None = None
    max_steps: int = 50
    error_threshold: int | None = 3  # consecutive all-failing tool steps; None: off
    timeout: float | None = None  # whole run, seconds
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_tokens: int | None = None
    parallel_tool_calls: bool = True
    agent: Any = None  # given to tools that take a ToolContext


class CancelScope:
    """Cancels a run from anywhere: another task, another thread, or a timer.

    The loop "arms" the scope only while it awaits a model chunk, a tool batch or a retry
    delay; a cancel then interrupts that await at once. Otherwise the loop sees the flag
    at its next check, so the consumer's own code is never interrupted.
    """

    __slots__ = ("_armed", "_fired", "_loop", "_task", "reason")

    def __init__(self) -> None:
        self.reason: StopReason | None = None
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._armed = False
        self._fired = False

    def cancel(self, reason: StopReason = "cancelled") -> None:
        """Ask the run to stop with ``reason``; safe to call from any thread, and more than once."""
        if self.reason is None:
            self.reason = reason
        loop = self._loop
        if loop is None:
            return
        try:
            same_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            same_loop = False
        if same_loop:
            self._interrupt()
        else:
            loop.call_soon_threadsafe(self._interrupt)

    def _interrupt(self) -> None:
        if self._armed and not self._fired and self._task is not None:
            self._fired = True
            self._task.cancel()

    def bind(self) -> None:
        self._task = asyncio.current_task()
        self._loop = asyncio.get_running_loop()

    def absorb(self) -> bool:
        """After a CancelledError: True when it came from this scope alone (the run goes on
        to a clean stop); False when the task itself is being cancelled."""
        if not self._fired or self._task is None:
            return False
        self._fired = False
        return self._task.uncancel() == 0


class _Stop(Exception):
    """Ends the run with a stop reason; internal to the loop."""

    def __init__(self, reason: StopReason, error: str | None = None) -> None:
        self.reason = reason
        self.error = error


async def run_loop(transcript: list[Message], new_input: list[Message], config: LoopConfig, *,
                   run_id: str, agent_id: str,
                   cancel: CancelScope | None = None) -> AsyncGenerator[Event, None]:
    """Run the agent on ``new_input``, appending to ``transcript``; yields every event."""
    run = _Run(transcript, config, run_id, cancel or CancelScope())
    run.scope.bind()
    timer = None
    if config.timeout is not None:
        timer = asyncio.get_running_loop().call_later(config.timeout, run.scope.cancel, "timeout")
    yield RunStart(run_id, agent_id)
    try:
        for message in new_input:
            yield run.append(message)
        stop = _Stop("end_turn")
        try:
            while True:
                async for event in run.step():
                    yield event
                if not run.proceed:
                    break
        except _Stop as reason:
            stop = reason
        await run.flush()
        yield run.end(stop.reason, stop.error)
    except (asyncio.CancelledError, GeneratorExit):
        # Cancelled from outside (the consumer's task, or the consumer left): answer what
        # is open, persist, and let the cancellation go on.
        run.scope.reason = run.scope.reason or "cancelled"
        run.answer_open_calls()
        await asyncio.shield(run.flush())
        raise
    except BaseException:
        run.answer_open_calls()
        raise
    finally:
        if timer is not None:
            timer.cancel()


class _Run:
    """The state of one run; ``step`` is one model call and the tool calls it makes."""

    def __init__(self, transcript: list[Message], config: LoopConfig, run_id: str,
                 scope: CancelScope) -> None:
        self.transcript = transcript
        self.config = config
        self.run_id = run_id
        self.scope = scope
        self.added: list[Message] = []
        self.pending: list[Message] = []  # appended since the last checkpoint
        self.usage = Usage()
        self.steps = 0
        self.proceed = True
        self.failing_steps = 0
        self.length_cutoffs = 0
        self.open_calls: list[ToolCall] = []  # issued but not yet answered
        self.outputs: list[ToolOutput | None] = []  # their outputs so far, in call order
        specs = [tool.spec() for tool in config.tools.values()]
        self.tool_specs: list[ToolSpec] = config.continuation.tool_specs(specs)

    def append(self, message: Message) -> MessageEvent:
        self.transcript.append(message)
        self.added.append(message)
        self.pending.append(message)
        return MessageEvent(message)

    async def step(self) -> AsyncGenerator[Event, None]:
        config = self.config
        self._check_cancel()
        if self.steps >= config.max_steps:
            raise _Stop("max_steps", f"stopped after {config.max_steps} steps (max_steps)")
        started = time.time()
        step = self.steps + 1
        yield StepStart(step)

        request = ModelRequest(config.build_context(self.transcript), self.tool_specs,
                               parallel_tool_calls=config.parallel_tool_calls,
                               max_tokens=config.max_tokens)
        if config.hooks and config.hooks.before_model_call:
            request = await call_hook(config.hooks.before_model_call, request) or request
        response: ModelResponse | None = None
        attempt = 0
        while response is None:  # one model call; transient failures are retried
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
                    else:
                        yield item
                        self._check_cancel()
            except asyncio.CancelledError:
                if not self.scope.absorb():
                    raise
                self._check_cancel()
            except ModelError as exc:
                attempt += 1
                if not exc.transient or attempt > config.retry.retries:
                    raise _Stop(_stop_reason_for(exc), _describe(exc, attempt)) from exc
                response = None
                await self._sleep(config.retry.delay(attempt, exc.retry_after))
            finally:
                await stream.aclose()  # type: ignore[attr-defined]
        if config.hooks and config.hooks.after_model_call:
            response = await call_hook(config.hooks.after_model_call, response) or response
        self.steps = step
        self.usage.add(response.usage)
        assistant = response.message
        calls = assistant.tool_calls
        for call in calls:
            yield ToolCallEnd(call)
        appended = self.append(assistant)
        self.open_calls, self.outputs = list(calls), []
        yield appended

        cut_off = response.finish_reason == "length"
        if cut_off and calls:
            outputs = [ToolOutput(LENGTH_CUTOFF_NOTICE, True) for _ in calls]
        else:
            for call in calls:
                yield ToolExecutionStart(call)
            outputs = await self._run_tools(calls)
        # All results are appended before any is yielded: a consumer that stops listening
        # midway must not leave a call unanswered.
        results: list[Message] = []
        events: list[Event] = []
        for call, output in zip(calls, outputs, strict=True):
            result = tool_result(call, output.text, is_error=output.is_error)
            results.append(result)
            events.append(ToolExecutionEnd(call, result))
            events.append(self.append(result))
        self.open_calls = []
        for event in events:
            yield event

        record = StepRecord(self.run_id, step, self.pending, response.usage, response.model,
                            response.finish_reason, started, time.time() - started)
        await self.checkpoint(record)
        if config.hooks and config.hooks.after_step:
            await call_hook(config.hooks.after_step, record)
        yield StepEnd(step, response.usage, response.finish_reason)
        self._check_cancel()

        if cut_off:
            self.length_cutoffs += 1
            if not calls or self.length_cutoffs > 1:
                raise _Stop("max_tokens_exceeded",
                            "the model's response was cut off by the output token limit")
            return
        if calls and all(r.is_error for r in results):
            self.failing_steps += 1
            limit = config.error_threshold
            if limit is not None and self.failing_steps >= limit:
                raise _Stop("error_threshold",
                            f"{self.failing_steps} consecutive steps in which every tool call "
                            f"failed; last error: {results[-1].text}")
        else:
            self.failing_steps = 0
        decision = config.continuation.decide(calls, results)
        self.proceed = decision.proceed
        if decision.inject is not None and decision.proceed:
            yield self.append(decision.inject)

    async def _run_tools(self, calls: list[ToolCall]) -> list[ToolOutput]:
        """Run a step's calls, concurrently unless a tool is sequential; outputs in call order.
        A cancel answers the calls that had not finished."""
        outputs: list[ToolOutput | None] = [None] * len(calls)
        self.outputs = outputs
        if calls and self.scope.reason is None:
            self.scope._armed = True
            try:
                batch: list[int] = []
                for index, call in enumerate(calls):
                    tool = self.config.tools.get(call.name)
                    if tool is not None and tool.sequential:
                        await self._run_batch(batch, calls, outputs)
                        batch = []
                        await self._run_batch([index], calls, outputs)
                    else:
                        batch.append(index)
                await self._run_batch(batch, calls, outputs)
            except asyncio.CancelledError:
                if not self.scope.absorb():
                    raise
            finally:
                self.scope._armed = False
        return [output or ToolOutput(CANCELLED_NOTICE, True) for output in outputs]

    async def _run_batch(self, indexes: list[int], calls: list[ToolCall],
                         outputs: list[ToolOutput | None]) -> None:
        if len(indexes) == 1:
            i = indexes[0]
            outputs[i] = await self._run_one(calls[i])
        elif indexes:
            async def run_into(i: int) -> None:
                outputs[i] = await self._run_one(calls[i])
            await asyncio.gather(*(run_into(i) for i in indexes))

    async def _run_one(self, call: ToolCall) -> ToolOutput:
        config = self.config
        arguments = config.continuation.arguments(call)
        hooks = config.hooks
        if hooks and hooks.before_tool_call:
            verdict = await call_hook(hooks.before_tool_call, call, arguments)
            if isinstance(verdict, Blocked):
                return ToolOutput(f"Tool call to {call.name!r} was blocked: {verdict.reason}", True)
            if isinstance(verdict, dict):
                arguments = verdict
        output = await execute_tool(call, arguments, config.tools, config.agent)
        if hooks and hooks.after_tool_call:
            changed = await call_hook(hooks.after_tool_call, call, output)
            if isinstance(changed, str):
                output = ToolOutput(changed, output.is_error)
            elif isinstance(changed, ToolOutput):
                output = changed
        return output

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

    async def checkpoint(self, record: StepRecord) -> None:
        self.pending = []
        if self.config.checkpoint is not None:
            await self.config.checkpoint(record)

    async def flush(self) -> None:
        """Persist what no step persisted (input before a failed call, answers at a cancel)."""
        if self.pending:
            await self.checkpoint(StepRecord(self.run_id, 0, self.pending))

    def end(self, reason: StopReason, error: str | None) -> RunEnd:
        output = self.config.continuation.output(self.added)
        return RunEnd(self.run_id, reason, self.steps, self.usage, output,
                      None if reason == "end_turn" else error, self.added)


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
