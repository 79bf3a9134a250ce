"""What a run did, told to those who watch: OpenTelemetry spans after the GenAI semantic
conventions (``invoke_agent``, a span per step, ``chat {model}``, ``execute_tool {name}``),
and the watchers an application adds (the server's Prometheus metrics).

A watcher with a ``call(model, request, response)`` method also sees each model call the
run makes (the server records providers' requests and responses that way, when asked).

The spans are made from what each step measured (``hooks.StepTiming``) as the step is
saved, with the times it measured, so the loop carries no tracing code. Nothing is done for
a run unless an OpenTelemetry SDK is configured (a tracer provider set) or a watcher added:
then ``watch`` leaves the run's ``LoopConfig`` as it was.

A compaction before a model call is a ``compact`` span of its step (tokens before and
after, messages summarised); a memory tool's span names the block it edits
(``stateloop.memory.block_label``).

Message contents (the model's answer, tool arguments and results) are user data: spans carry
them only when ``STATELOOP_TRACE_CONTENT`` is ``1`` or ``true``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import orjson
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .events import RunEnd
from .hooks import QueueWait, StepRecord
from .llm.base import Model, ModelRequest, ModelResponse, StreamItem
from .loop_config import LoopConfig
from .messages import Message, ToolCall, Usage
from .tools.builtin import MEMORY_EDITS

__all__ = ["CONTENT_ENV", "RunTrace", "RunWatcher", "WatchedModel", "add_watcher",
           "remove_watcher", "tracing_on", "watch"]

CONTENT_ENV = "STATELOOP_TRACE_CONTENT"
CLEAN_ENDS = frozenset({"end_turn", "requires_approval", "max_steps", "tool_rule"})

_tracer = trace.get_tracer("stateloop")


class RunWatcher(Protocol):
    """Sees each step of one run as it is saved (``StepRecord.timing`` says where its time
    went; ``step`` 0: tool calls resumed after an approval, outside any step), and the run's
    end."""

    def step(self, record: StepRecord) -> None: ...

    def end(self, end: RunEnd) -> None: ...


WatcherFactory = Callable[[str, str, str], RunWatcher]  # (run id, agent id, model) -> watcher
_watchers: list[WatcherFactory] = []


def add_watcher(factory: WatcherFactory) -> None:
    """Have ``factory(run_id, agent_id, model)`` make a watcher for every run from now on."""
    _watchers.append(factory)


def remove_watcher(factory: WatcherFactory) -> None:
    """Stop making watchers with ``factory`` (for runs that start from now on)."""
    if factory in _watchers:
        _watchers.remove(factory)


def tracing_on() -> bool:
    """Whether an OpenTelemetry SDK is configured: without one, no span is made."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def watch(config: LoopConfig, run_id: str, agent_id: str,
          waited: QueueWait | None = None) -> Callable[[], None] | None:
    """Have this run's steps and end told to its watchers (its trace among them), by wrapping
    ``config``'s checkpoint and ``on_end``; with none, ``config`` is left alone (None is
    returned). Watchers with a ``queued(wait)`` method are told first how long the run
    ``waited`` for its turn. The function returned ends the run for its watchers, as
    cancelled, if it was stopped without an end of its own (its consumer left)."""
    model = config.model.name
    watchers = [factory(run_id, agent_id, model) for factory in _watchers]
    if waited is not None:
        for watcher in watchers:
            if hasattr(watcher, "queued"):
                watcher.queued(waited)
    if tracing_on():
        watchers.append(RunTrace(run_id, agent_id, model))
    if not watchers:
        return None
    callers = [watcher for watcher in watchers if hasattr(watcher, "call")]
    if callers:
        config.model = WatchedModel(config.model, callers)
    checkpoint, on_end = config.checkpoint, config.on_end

    steps, usage, over = [0], Usage(), [False]

    def saved(record: StepRecord) -> Awaitable[None] | None:
        # 0: messages saved outside a step; timed, tool calls resumed after an approval
        if record.step or record.timing is not None:
            if record.step:
                steps[0] += 1
                usage.add(record.usage)
            for watcher in watchers:
                watcher.step(record)
        return checkpoint(record) if checkpoint is not None else None

    def ended(end: RunEnd) -> None:
        over[0] = True
        for watcher in watchers:
            watcher.end(end)
        if on_end is not None:
            on_end(end)

    def abandoned() -> None:
        if not over[0]:
            ended(RunEnd(run_id, "cancelled", steps[0], usage,
                         error="the run was stopped before it ended (its consumer left)"))

    config.checkpoint, config.on_end = saved, ended
    return abandoned


class WatchedModel:
    """A run's model, telling watchers what each call that answered was asked and answered
    (``watcher.call(model, request, response)``); everything else is the model's own."""

    def __init__(self, model: Model, watchers: list[Any]) -> None:
        self.model, self.watchers = model, watchers
        self.name = model.name
        self.context_window = model.context_window
        self.max_output_tokens = model.max_output_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        async for item in self.model.stream(request):
            if isinstance(item, ModelResponse):
                for watcher in self.watchers:
                    watcher.call(self.model, request, item)
            yield item


def _content_on() -> bool:
    return os.environ.get(CONTENT_ENV, "").strip().lower() in ("1", "true")


class RunTrace:
    """One run's spans: ``invoke_agent`` from its start to its end, a child of the span
    current when it starts (the server's request), and each step's spans under it."""

    def __init__(self, run_id: str, agent_id: str, model: str) -> None:
        provider, _, name = model.rpartition("/")  # a handle: "openai/gpt-4o-mini"
        self.model = name
        self.provider = {"gen_ai.provider.name": provider} if provider else {}
        self.content = _content_on()
        self.span = _tracer.start_span("invoke_agent", kind=SpanKind.INTERNAL, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": agent_id,
            "gen_ai.request.model": name, "stateloop.run.id": run_id, **self.provider})
        self.context = trace.set_span_in_context(self.span)
        self.trace_id = format(self.span.get_span_context().trace_id, "032x")
        self.uncommitted: list[tuple[Any, StepRecord]] = []  # steps whose write is queued

    def step(self, record: StepRecord) -> None:
        """The step's span, with its compactions', its model call's and each tool call's, at
        their times. Tool calls resumed after an approval (no step of their own) are spans
        of the run."""
        self._commits()
        record.trace_id = self.trace_id  # stored with the step: the run's trace is found
        timing = record.timing
        if not record.step:
            if timing is not None:
                self._tools(record, self.context)
            return
        start = int(record.started_at * 1e9)
        span = _tracer.start_span(f"step {record.step}", self.context, start_time=start,
                                  attributes={"stateloop.step": record.step})
        self.uncommitted.append((trace.set_span_in_context(span), record))
        if timing is not None:
            inside = trace.set_span_in_context(span)
            for began, done, compaction in timing.compactions:
                _tracer.start_span("compact", inside, start_time=began, attributes={
                    "stateloop.compaction.tokens_before": compaction.tokens_before,
                    "stateloop.compaction.tokens_after": compaction.tokens_after,
                    "stateloop.compaction.messages_summarized": compaction.messages_evicted,
                    "stateloop.compaction.strategy": compaction.strategy}).end(end_time=done)
            if timing.model_call:
                self._chat(record, inside)
            self._tools(record, inside)
        span.end(end_time=start + int(record.duration * 1e9))

    def _commits(self) -> None:
        """A ``store commit`` span for each step whose write has landed since (its commit
        is queued after the step is told, and lands at the next turn of the event loop)."""
        waiting = []
        for context, record in self.uncommitted:
            times = record.commit_times() if record.commit_times is not None else None
            if times is None:
                if record.commit_times is not None:
                    waiting.append((context, record))
                continue
            _tracer.start_span("store commit", context, start_time=times[0], attributes={
                "db.operation.name": "COMMIT", "stateloop.step": record.step,
            }).end(end_time=times[1])
        self.uncommitted = waiting

    def _tools(self, record: StepRecord, parent: Any) -> None:
        timing = record.timing
        assert timing is not None
        calls = {call.id: call for message in record.messages for call in message.tool_calls}
        results = {message.tool_call_id: message for message in record.messages
                   if message.role == "tool"}
        for call_id, (began, done) in timing.tool_calls.items():
            call, result = calls.get(call_id), results.get(call_id)
            name = (call.name if call is not None
                    else result.name if result is not None and result.name else "unknown")
            tool = _tracer.start_span(f"execute_tool {name}", parent, start_time=began,
                                      attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function"})
            label = _block_label(call) if call is not None else None
            if label is not None:
                tool.set_attribute("stateloop.memory.block_label", label)
            if self.content and call is not None:
                tool.set_attribute("gen_ai.tool.call.arguments", _json(call.arguments))
            if self.content and result is not None:
                tool.set_attribute("gen_ai.tool.call.result", result.text)
            if result is not None and result.is_error:
                tool.set_status(Status(StatusCode.ERROR))
                tool.set_attribute("error.type", "tool_error")
            tool.end(end_time=done)

    def _chat(self, record: StepRecord, parent: Any) -> None:
        timing = record.timing
        assert timing is not None
        usage = record.usage
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": self.model, **self.provider,
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.server.time_to_first_token": timing.time_to_first_token_ns / 1e9}
        if record.model:
            attributes["gen_ai.response.model"] = record.model
        if record.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [record.finish_reason]
        if self.content:
            answer = next((m for m in record.messages if m.role == "assistant"), None)
            if answer is not None:
                attributes["gen_ai.output.messages"] = _json([_shown(answer)])
        chat = _tracer.start_span(f"chat {self.model}", parent, kind=SpanKind.CLIENT,
                                  start_time=timing.llm_request_start_ns, attributes=attributes)
        chat.end(end_time=timing.llm_request_start_ns + timing.llm_request_ns)

    def end(self, end: RunEnd) -> None:
        """The run's span ends, with its stop reason and tokens."""
        self._commits()  # the run's end is stored after its steps' writes landed
        span: Span = self.span
        span.set_attributes({"stateloop.stop_reason": end.stop_reason,
                             "stateloop.steps": end.steps,
                             "gen_ai.usage.input_tokens": end.usage.input_tokens,
                             "gen_ai.usage.output_tokens": end.usage.output_tokens})
        if end.stop_reason not in CLEAN_ENDS:
            span.set_status(Status(StatusCode.ERROR, end.error or end.stop_reason))
            span.set_attribute("error.type", end.stop_reason)
        span.end()


def _block_label(call: ToolCall) -> str | None:
    """The memory block a memory tool's call edits (None: not a memory edit)."""
    if call.name not in MEMORY_EDITS:
        return None
    label = call.arguments.get("label") or call.arguments.get("path")
    if not isinstance(label, str):
        return None
    return label.removeprefix("/memories/").removesuffix(".md") or None


def _shown(message: Message) -> dict[str, Any]:
    """A message as the GenAI conventions' ``gen_ai.output.messages`` has one."""
    parts: list[dict[str, Any]] = [{"type": "text", "content": message.text}] if message.text \
        else []
    parts += [{"type": "tool_call", "id": call.id, "name": call.name,
               "arguments": call.arguments} for call in message.tool_calls]
    return {"role": message.role, "parts": parts}


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()
