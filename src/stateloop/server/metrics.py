"""The server's Prometheus metrics: runs by stop reason, steps, model calls (count, latency,
time to first token, tokens) by model, tool calls (count, latency, errors) by tool. Fed by a
run watcher (``stateloop.tracing``) as each step is saved; ``GET /metrics`` serves them in
Prometheus' text format (routes/metrics.py)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from ..events import RunEnd
from ..hooks import StepRecord

__all__ = ["ServerMetrics"]

# Model calls take seconds; tool calls from a millisecond (memory edits) to minutes.
MODEL_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)
TOOL_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ServerMetrics:
    """One server's metrics, in a registry of its own; ``watch`` is its run watcher."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.runs = Counter("stateloop_runs", "Runs ended, by stop reason.", ["stop_reason"],
                            registry=registry)
        self.steps = Counter("stateloop_steps", "Steps saved.", registry=registry)
        self.model_calls = Counter("stateloop_model_calls", "Model calls, by model.",
                                   ["model"], registry=registry)
        self.model_seconds = Histogram(
            "stateloop_model_call_seconds", "A step's model call, retries included.",
            ["model"], buckets=MODEL_BUCKETS, registry=registry)
        self.first_token = Histogram(
            "stateloop_time_to_first_token_seconds", "From a model call's start to its first "
            "streamed chunk.", ["model"], buckets=MODEL_BUCKETS, registry=registry)
        self.tokens = Counter("stateloop_model_tokens", "Tokens, by model and direction.",
                              ["model", "direction"], registry=registry)
        self.tool_calls = Counter("stateloop_tool_calls", "Tool calls run, by tool.", ["tool"],
                                  registry=registry)
        self.tool_seconds = Histogram("stateloop_tool_call_seconds", "A tool call's run.",
                                      ["tool"], buckets=TOOL_BUCKETS, registry=registry)
        self.tool_errors = Counter("stateloop_tool_errors", "Tool calls that failed, by tool.",
                                   ["tool"], registry=registry)

    def watch(self, run_id: str, agent_id: str, model: str) -> _RunCounts:
        """The watcher of one run (``stateloop.tracing.add_watcher``)."""
        return _RunCounts(self, model)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)


class _RunCounts:
    """Counts one run's steps and end into its server's metrics."""

    def __init__(self, metrics: ServerMetrics, model: str) -> None:
        self.metrics, self.model = metrics, model

    def step(self, record: StepRecord) -> None:
        metrics, timing = self.metrics, record.timing
        metrics.steps.inc()
        if timing is None:
            return
        model = record.model or self.model
        metrics.model_calls.labels(model).inc()
        metrics.model_seconds.labels(model).observe(timing.llm_request_ns / 1e9)
        metrics.first_token.labels(model).observe(timing.time_to_first_token_ns / 1e9)
        metrics.tokens.labels(model, "input").inc(record.usage.input_tokens)
        metrics.tokens.labels(model, "output").inc(record.usage.output_tokens)
        names = {call.id: call.name for message in record.messages
                 for call in message.tool_calls}
        failed = {message.tool_call_id for message in record.messages
                  if message.role == "tool" and message.is_error}
        for call_id, (began, done) in timing.tool_calls.items():
            tool = names.get(call_id, "unknown")
            metrics.tool_calls.labels(tool).inc()
            metrics.tool_seconds.labels(tool).observe((done - began) / 1e9)
            if call_id in failed:
                metrics.tool_errors.labels(tool).inc()

    def end(self, end: RunEnd) -> None:
        self.metrics.runs.labels(end.stop_reason).inc()
