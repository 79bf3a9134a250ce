"""The server's Prometheus metrics: runs by stop reason, steps, model calls (count, latency,
time to first token, tokens) by model, tool calls (count, latency, errors) by tool, how long
runs waited for their agent's turn, turns taken on a fleet, live sandbox workers and the
store's commits of steps. Fed by a run watcher
(``stateloop.tracing``) as each step is saved; ``GET /metrics`` serves them in Prometheus'
text format (routes/metrics.py)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ..events import RunEnd
from ..hooks import QueueWait, StepRecord, StepTiming
from ..tools.pool import WorkerPool

__all__ = ["ServerMetrics"]

# Model calls take seconds; tool calls from a millisecond (memory edits) to minutes.
MODEL_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)
TOOL_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# A run waits for the runs of its agent ahead of it: nothing, or whole runs.
# A group commit of steps' writes: a millisecond on SQLite, a round trip or a few on PostgreSQL.
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
QUEUE_BUCKETS = (0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# Distinct values a model or tool label takes; later ones are counted as OTHER. Tool names
# come from what a model calls (a name it makes up included) and models from what clients
# name, so neither may grow the series, and a scrape, without bound.
LABEL_VALUES = 200
OTHER = "other"


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
        # Not by agent: agent ids are unbounded, and each would be series of its own.
        self.queue_wait = Histogram(
            "stateloop_run_queue_wait_seconds", "How long a run waited for its agent's "
            "earlier runs to end before it began.", buckets=QUEUE_BUCKETS, registry=registry)
        self.fleet_turns = Counter(
            "stateloop_fleet_turns", "Turns taken on a store several servers share "
            "(PostgreSQL), by whether another server's run went first.", ["waited"],
            registry=registry)
        self.commit_seconds = Histogram(
            "stateloop_store_commit_seconds", "A commit of queued step writes (the steps that "
            "ended together share one).", buckets=COMMIT_BUCKETS, registry=registry)
        self.committed_steps = Counter("stateloop_store_committed_writes",
                                       "Step writes committed.", registry=registry)
        self.workers = Gauge("stateloop_sandbox_workers", "Live tool sandbox workers, idle "
                             "(warm) or busy (in a call).", ["state"], registry=registry)
        self._models: set[str] = set()
        self._tools: set[str] = set()

    def commit(self, seconds: float, items: int) -> None:
        """A group commit of ``items`` step writes took ``seconds``
        (``stateloop.store.batching.watch_commits``)."""
        self.commit_seconds.observe(seconds)
        self.committed_steps.inc(items)

    def count_workers(self, pool: WorkerPool) -> None:
        """Have ``stateloop_sandbox_workers`` read ``pool`` at each scrape."""
        self.workers.labels("idle").set_function(lambda: pool.counts()[0])
        self.workers.labels("busy").set_function(lambda: pool.counts()[1])

    def model_label(self, model: str) -> str:
        """The label a model is counted under (``OTHER`` once LABEL_VALUES are in use)."""
        return _bounded(self._models, model)

    def tool_label(self, tool: str) -> str:
        """The label a tool is counted under (``OTHER`` once LABEL_VALUES are in use)."""
        return _bounded(self._tools, tool)

    def watch(self, run_id: str, agent_id: str, model: str) -> _RunCounts:
        """The watcher of one run (``stateloop.tracing.add_watcher``)."""
        return _RunCounts(self, model)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)


class _RunCounts:
    """Counts one run's steps and end into its server's metrics (the labelled series it
    uses looked up once: a lookup costs as much as the count)."""

    def __init__(self, metrics: ServerMetrics, model: str) -> None:
        self.metrics, self.model = metrics, model
        self.models: dict[str, tuple[Any, ...]] = {}
        self.tools: dict[str, tuple[Any, ...]] = {}

    def _model(self, model: str) -> tuple[Any, ...]:
        series = self.models.get(model)
        if series is None:
            m = self.metrics
            label = m.model_label(model)
            series = self.models[model] = (
                m.model_calls.labels(label), m.model_seconds.labels(label),
                m.first_token.labels(label), m.tokens.labels(label, "input"),
                m.tokens.labels(label, "output"))
        return series

    def _tool(self, tool: str) -> tuple[Any, ...]:
        series = self.tools.get(tool)
        if series is None:
            m = self.metrics
            label = m.tool_label(tool)
            series = self.tools[tool] = (m.tool_calls.labels(label),
                                         m.tool_seconds.labels(label),
                                         m.tool_errors.labels(label))
        return series

    def queued(self, wait: QueueWait) -> None:
        self.metrics.queue_wait.observe(wait.seconds)
        if wait.fleet_waited is not None:
            self.metrics.fleet_turns.labels("true" if wait.fleet_waited else "false").inc()

    def step(self, record: StepRecord) -> None:
        timing = record.timing
        if record.step:  # 0: tool calls resumed after an approval, outside a step
            self.metrics.steps.inc()
        if timing is None:
            return
        if timing.model_call:
            self._model_call(record, timing)
        if not timing.tool_calls:
            return
        names = {message.tool_call_id: message.name for message in record.messages
                 if message.role == "tool" and message.tool_call_id and message.name}
        names.update({call.id: call.name for message in record.messages
                      for call in message.tool_calls})
        failed = {message.tool_call_id for message in record.messages
                  if message.role == "tool" and message.is_error}
        for call_id, (began, done) in timing.tool_calls.items():
            runs, took, errors = self._tool(names.get(call_id, "unknown"))
            runs.inc()
            took.observe((done - began) / 1e9)
            if call_id in failed:
                errors.inc()

    def _model_call(self, record: StepRecord, timing: StepTiming) -> None:
        calls, seconds, first_token, tokens_in, tokens_out = self._model(
            record.model or self.model)
        calls.inc()
        seconds.observe(timing.llm_request_ns / 1e9)
        first_token.observe(timing.time_to_first_token_ns / 1e9)
        tokens_in.inc(record.usage.input_tokens)
        tokens_out.inc(record.usage.output_tokens)

    def end(self, end: RunEnd) -> None:
        self.metrics.runs.labels(end.stop_reason).inc()


def _bounded(seen: set[str], value: str) -> str:
    if value not in seen:
        if len(seen) >= LABEL_VALUES:
            return OTHER
        seen.add(value)
    return value
