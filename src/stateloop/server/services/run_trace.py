"""A run's trace rebuilt from what the store keeps of it (the run's record and its steps'
measured times), as the rows of the ``otel_traces`` table that ClickHouse's OpenTelemetry
exporter writes: what Letta's ``GET /v1/runs/{run_id}/trace`` reads back. Nothing is
collected for it, so every server of a fleet answers it, before and after a restart.

The spans, named as Letta's trace viewer picks them out: the run (the root, no parent),
``agent_step`` per step, under each its model call's ``time_to_first_token`` and
``chat {model}``, and ``Agent._execute_tool`` per tool call. The trace id is the run's own
when it was traced (its steps store it), else derived from its id; span ids are derived from
the run's and steps' ids, so a trace read twice is the same trace.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from ...store import RunRecord, StepRecord
from ...tracing import CLEAN_ENDS

__all__ = ["SERVICE", "run_trace", "span_id", "trace_id"]

SERVICE = "stateloop"
UNSET, ERROR = "STATUS_CODE_UNSET", "STATUS_CODE_ERROR"


def trace_id(run_id: str) -> str:
    """The run's trace id: 32 hex digits derived from its id."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:32]


def span_id(*names: str) -> str:
    """A span's id: 16 hex digits derived from the ids and names that place it."""
    return hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]


@dataclass(slots=True)
class _Span:
    name: str
    id: str
    parent: str
    start_ns: int
    duration_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    kind: str = "SPAN_KIND_INTERNAL"
    status: str = UNSET
    message: str = ""


def run_trace(run: RunRecord, steps: list[StepRecord], limit: int) -> list[dict[str, Any]]:
    """The run's spans as ``otel_traces`` rows, oldest first, at most ``limit``."""
    started = int((run.started_at or run.created_at) * 1e9)
    root = _Span("invoke_agent", span_id(run.id), "", started, 0, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": run.agent_id,
        "stateloop.run.id": run.id, "stateloop.run.status": run.status,
        "stateloop.steps": run.step_count,
        "gen_ai.usage.input_tokens": run.usage.input_tokens,
        "gen_ai.usage.output_tokens": run.usage.output_tokens})
    if run.stop_reason:
        root.attributes["stateloop.stop_reason"] = run.stop_reason
        if run.stop_reason not in CLEAN_ENDS:
            root.status, root.message = ERROR, run.error or run.stop_reason
    spans = [root]
    for step in steps:
        spans += _step_spans(step, root.id)
    ended = (int(run.completed_at * 1e9) if run.completed_at is not None
             else max(span.start_ns + span.duration_ns for span in spans))
    root.duration_ns = max(0, ended - started)
    spans.sort(key=lambda span: span.start_ns)
    traced = next((step.metadata["trace_id"] for step in steps if step.metadata.get("trace_id")),
                  None)  # the run's own trace, when it was traced
    return [_row(traced or trace_id(run.id), span) for span in spans[:limit]]


def _step_spans(step: StepRecord, parent: str) -> list[_Span]:
    measured: dict[str, Any] = step.metadata.get("metrics") or {}
    took = int((step.latency_ms or 0) * 1e6)
    begun = measured.get("step_start_ns", int(step.created_at * 1e9) - took)
    usage = step.usage
    span = _Span("agent_step", span_id(step.id), parent, begun,
                 measured.get("step_ns", took), {
        "stateloop.step.id": step.id, "stateloop.step": step.index + 1,
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens})
    if step.model:
        span.attributes["gen_ai.response.model"] = step.model
    if step.finish_reason:
        span.attributes["gen_ai.response.finish_reasons"] = [step.finish_reason]
    if step.error:
        span.status, span.message = ERROR, step.error
    spans = [span]
    if "llm_request_start_ns" not in measured:
        return spans  # stored before its times were measured, or no model call
    asked = measured["llm_request_start_ns"]
    spans.append(_Span("time_to_first_token", span_id(step.id, "ttft"), span.id, asked,
                       measured["time_to_first_token_ns"]))
    provider, _, model = (step.model or "").rpartition("/")
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens}
    if provider:
        chat["gen_ai.provider.name"] = provider
    spans.append(_Span(f"chat {model}".rstrip(), span_id(step.id, "chat"), span.id, asked,
                       measured["llm_request_ns"], chat, kind="SPAN_KIND_CLIENT"))
    for call_id, name, began, done, failed in measured.get("tool_calls", ()):
        tool = _Span("Agent._execute_tool", span_id(step.id, call_id), span.id, began,
                     done - began, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function",
            "parameter.tool_name": name, "parameter.tool_call_id": call_id})
        if failed:
            tool.status, tool.message = ERROR, "tool_error"
            tool.attributes["error.type"] = "tool_error"
        spans.append(tool)
    return spans


def _row(trace: str, span: _Span) -> dict[str, Any]:
    """A span as the ClickHouse exporter stores it: attribute values as strings, times in
    UTC, the length in nanoseconds."""
    seconds, nanos = divmod(span.start_ns, 1_000_000_000)
    at = datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)
    return {"Timestamp": f"{at.isoformat(timespec='seconds')}.{nanos:09d}", "TraceId": trace,
            "SpanId": span.id, "ParentSpanId": span.parent, "TraceState": "",
            "SpanName": span.name, "SpanKind": span.kind, "ServiceName": SERVICE,
            "ResourceAttributes": {"service.name": SERVICE}, "ScopeName": "stateloop",
            "ScopeVersion": "",
            "SpanAttributes": {key: _text(value) for key, value in span.attributes.items()},
            "Duration": span.duration_ns, "StatusCode": span.status,
            "StatusMessage": span.message, "Events.Timestamp": [], "Events.Name": [],
            "Events.Attributes": [], "Links.TraceId": [], "Links.SpanId": [],
            "Links.TraceState": [], "Links.Attributes": []}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()
