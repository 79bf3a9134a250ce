"""The spans of a run beyond model and tool calls, read from the OpenTelemetry SDK's in-memory
exporter: a compaction before a model call (``compact``, tokens before and after, messages
summarised), a memory edit's block label on its tool span, and tool calls resumed after an
approval traced (and counted in the server's metrics) like any other."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from letta_client import Letta
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from fake_script import Script
from stateloop import Agent, Block, tool, tracing
from stateloop.approvals import Approval
from stateloop.server.metrics import ServerMetrics
from stateloop.server.services.run_trace import run_trace
from stateloop.store import Page, open_store
from stateloop.testing import ScriptedModel, call, reply
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

SUMMARIZER = "You keep the running summary"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Runs traced into an exporter of this test's own (the process's tracer provider is
    left as it was)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("stateloop"))
    monkeypatch.setattr(tracing, "tracing_on", lambda: True)
    yield exporter
    provider.shutdown()


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith(prefix)]


def words(n: int, seed: int) -> str:
    return " ".join(f"w{seed}x{i}" for i in range(n))


async def test_a_compaction_is_a_span_of_its_step(spans: InMemorySpanExporter) -> None:
    model = ScriptedModel(lambda request: (
        reply("summary") if request.messages[0].text.startswith(SUMMARIZER)
        else reply(words(60, len(request.messages)))), context_window=1200)
    agent = Agent(model=model, system="Be brief.", compaction="summarize")
    for i in range(12):
        await agent.run(words(60, 100 + i))
    compactions = named(spans, "compact")
    assert compactions
    steps = {span.context.span_id: span for span in named(spans, "step ")}
    for span in compactions:
        assert span.parent is not None and span.parent.span_id in steps
        attributes = span.attributes or {}
        before = attributes["stateloop.compaction.tokens_before"]
        after = attributes["stateloop.compaction.tokens_after"]
        assert isinstance(before, int) and isinstance(after, int) and after < before
        summarised = attributes["stateloop.compaction.messages_summarized"]
        assert isinstance(summarised, int) and summarised > 0
        assert attributes["stateloop.compaction.strategy"] == "summarize"
        step = steps[span.parent.span_id]
        assert step.start_time is not None and span.start_time is not None
        assert step.start_time <= span.start_time <= (span.end_time or 0)
        [chat] = [s for s in named(spans, "chat ") if s.parent is not None
                  and s.parent.span_id == span.parent.span_id]
        assert (span.end_time or 0) <= (chat.start_time or 0)  # compacted, then called


async def test_a_memory_edit_names_its_block(spans: InMemorySpanExporter) -> None:
    model = ScriptedModel([call("core_memory_append", label="human", content="Likes tea."),
                           reply("Noted.")])
    agent = Agent(model=model, tools=["core_memory_append"],
                  blocks=[Block("human", "Name: Ann")])
    await agent.run("remember I like tea")
    [edit] = named(spans, "execute_tool core_memory_append")
    assert (edit.attributes or {})["stateloop.memory.block_label"] == "human"
    assert edit.parent is not None
    assert edit.parent.span_id in {s.context.span_id for s in named(spans, "step ")}


@tool(requires_approval=True)
def wire_money(amount: int) -> str:
    """Send money."""
    return f"sent {amount}"


async def test_a_tool_call_resumed_after_approval_is_traced_and_counted(
        spans: InMemorySpanExporter) -> None:
    metrics = ServerMetrics()
    tracing.add_watcher(metrics.watch)
    try:
        agent = Agent(model=ScriptedModel([call("wire_money", amount=5), reply("Sent.")]),
                      tools=[wire_money])
        paused = await agent.run("pay 5")
        assert not named(spans, "execute_tool")  # nothing ran yet
        [pending] = paused.pending_approvals
        done = await agent.run(approvals=[Approval(pending.id, approve=True)])
        assert done.output == "Sent."
    finally:
        tracing.remove_watcher(metrics.watch)
    [wired] = named(spans, "execute_tool wire_money")
    runs = named(spans, "invoke_agent")
    assert len(runs) == 2 and wired.parent is not None
    assert wired.parent.span_id == runs[1].context.span_id  # the resuming run's, no step's
    assert (wired.attributes or {})["gen_ai.tool.call.id"] == pending.id
    assert (wired.end_time or 0) > (wired.start_time or 0)
    samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in text_string_to_metric_families(metrics.exposition().decode())
               for sample in family.samples}
    assert samples[("stateloop_tool_calls_total", (("tool", "wire_money"),))] == 1
    assert samples[("stateloop_steps_total", ())] == 2  # the model's steps, not the resumed calls


async def test_a_run_its_consumer_left_still_ends_its_span_and_is_counted(
        spans: InMemorySpanExporter) -> None:
    metrics = ServerMetrics()
    tracing.add_watcher(metrics.watch)
    try:
        agent = Agent(model=ScriptedModel([call("lookup_pause", seconds=0.0), reply("Done.")]),
                      tools=[lookup_pause])
        stream = agent.stream("look it up")
        async for event in stream:
            if event.type == "tool_execution_end":
                break  # the consumer leaves mid-run
        await stream.aclose()
    finally:
        tracing.remove_watcher(metrics.watch)
    [run] = named(spans, "invoke_agent")
    attributes = run.attributes or {}
    assert attributes["stateloop.stop_reason"] == "cancelled"
    assert run.status.status_code.name == "ERROR"  # stopped before its end
    samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in text_string_to_metric_families(metrics.exposition().decode())
               for sample in family.samples}
    assert samples[("stateloop_runs_total", (("stop_reason", "cancelled"),))] == 1


@tool
def lookup_pause(seconds: float) -> str:
    """Look something up.

    Args:
        seconds: How long the lookup takes.
    """
    return "found"


async def test_each_step_s_store_commit_is_a_span_of_its_step(
        spans: InMemorySpanExporter, tmp_path: Path) -> None:
    agent = Agent(model=ScriptedModel([call("lookup_pause", seconds=0.0), reply("Done.")]),
                  tools=[lookup_pause], name="stored", store=f"sqlite:///{tmp_path / 'a.db'}")
    try:
        await agent.run("look it up")
    finally:
        await agent.aclose()
    steps = {span.context.span_id: span for span in named(spans, "step ")}
    commits = named(spans, "store commit")
    assert len(steps) == 2 and len(commits) == 2
    assert {commit.parent.span_id for commit in commits if commit.parent} == set(steps)
    for commit in commits:
        assert commit.parent is not None
        step = steps[commit.parent.span_id]
        assert (step.start_time or 0) <= (commit.start_time or 0) <= (commit.end_time or 0)
        assert (commit.attributes or {})["stateloop.step"] == (step.attributes or {})[
            "stateloop.step"]


async def test_a_traced_run_s_rebuilt_trace_has_its_own_trace_id(
        spans: InMemorySpanExporter, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    agent = Agent(model=ScriptedModel([call("lookup_pause", seconds=0.0), reply("Done.")]),
                  tools=[lookup_pause], name="traced", store=url)
    try:
        result = await agent.run("look it up")
    finally:
        await agent.aclose()
    [run_span] = named(spans, "invoke_agent")
    store = await open_store(url)
    try:
        run = await store.get_run(result.run_id)
        steps = await store.page_steps(Page(), run_id=run.id)
    finally:
        await store.close()
    rows = run_trace(run, steps, 1000)
    assert {row["TraceId"] for row in rows} == {format(run_span.context.trace_id, "032x")}
    assert [row["SpanName"] for row in rows].count("agent_step") == 2


def test_a_traced_run_s_steps_carry_its_trace_id_through_the_server(
        spans: InMemorySpanExporter, fake: FakeOpenAI, script: Script, tmp_path: Path) -> None:
    with Server(settings_for(fake, tmp_path / "traced.db")) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
        agent = new_agent(client)
        script.set(reply("Hello."))
        client.agents.messages.create(agent.id, input="hi")
        [run] = client.runs.list(agent_id=agent.id).items
        [step] = client.runs.steps.list(run.id).items
        [run_span] = [span for span in named(spans, "invoke_agent")
                      if (span.attributes or {})["stateloop.run.id"] == run.id]
        traced = format(run_span.context.trace_id, "032x")
        assert step.trace_id == traced
        assert [s.id for s in client.steps.list(trace_ids=[traced]).items] == [step.id]
        assert client.steps.list(trace_ids=["0" * 32]).items == []
        assert {row["TraceId"] for row in client.runs.trace.retrieve(run.id)} == {traced}
