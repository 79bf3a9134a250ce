"""Traces of runs: ``stateloop serve`` with the OTLP exporter pointed at a loopback OTLP/HTTP
receiver here; a tool-calling run's span tree, names, GenAI attributes, the caller's trace
continued, and message contents only when the operator opts in. Without an SDK, a run is
left as it was."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import gzip
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from letta_client import Letta
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from fake_script import Script
from stateloop import tracing
from stateloop.errors import ConfigError
from stateloop.loop_config import LoopConfig
from stateloop.server.telemetry import tracing_wanted
from stateloop.testing import ScriptedModel
from stateloop.testing.scripted import call, reply
from test_cli_support import Cli, cli, fake, script, serving  # noqa: F401 (fixtures)

SHOUT = '''
def shout(text: str) -> str:
    """Repeat the text in capitals.

    Args:
        text: What to repeat.
    """
    return text.upper()
'''
SPAN_KIND_SERVER, SPAN_KIND_CLIENT, STATUS_ERROR = 2, 3, 2


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start: int
    end: int
    attributes: dict[str, Any]
    status: int


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class Receiver:
    """An OTLP/HTTP receiver on loopback: the spans every export brought."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                with receiver.lock:
                    receiver.spans += [
                        Span(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                             s.kind, s.start_time_unix_nano, s.end_time_unix_nano,
                             {a.key: _value(a.value) for a in s.attributes}, s.status.code)
                        for resource in request.resource_spans
                        for scope in resource.scope_spans for s in scope.spans]
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def trace(self, trace_id: str, until: str, timeout: float = 30) -> list[Span]:
        """The spans of this trace, once one named ``until`` came (they come in batches)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = [s for s in self.spans if s.trace_id == trace_id]
            if any(s.name == until for s in found):
                time.sleep(0.3)  # the batch's last spans
                with self.lock:
                    return [s for s in self.spans if s.trace_id == trace_id]
            time.sleep(0.05)
        raise AssertionError(f"no span {until!r} of trace {trace_id} came: {found}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    yield running
    running.server.shutdown()
    running.server.server_close()


def _traced_run(cli: Cli, script: Script, receiver: Receiver,
                env: dict[str, str | None]) -> tuple[str, str, list[Span]]:
    """A tool-calling run through ``stateloop serve``, sent inside the caller's trace:
    the caller's trace and span ids, and the spans that came."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50",
           **env}
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    with serving(cli, env=env) as url:
        client = Letta(base_url=url, api_key="unused", max_retries=0, timeout=60)
        client.tools.upsert(source_code=SHOUT)
        agent = client.agents.create(model="openai/gpt-4o-mini", tools=["shout"],
                                     include_base_tools=False,
                                     memory_blocks=[{"label": "human", "value": "Ada"}])
        script.set(call("shout", text="hi"), reply("It said HI."))
        response = client.agents.messages.create(
            agent.id, input="Shout hi",
            extra_headers={"traceparent": f"00-{trace_id}-{parent_id}-01"})
        assert response.stop_reason.stop_reason == "end_turn"
        spans = receiver.trace(trace_id, until="invoke_agent")
    return trace_id, parent_id, spans


def test_a_runs_span_tree_continues_the_callers_trace(cli: Cli, script: Script,
                                                      receiver: Receiver) -> None:
    _, parent_id, spans = _traced_run(cli, script, receiver, {})  # spans of the trace sent
    [request] = [s for s in spans if s.kind == SPAN_KIND_SERVER]
    assert request.name == "POST /v1/agents/{agent_id}/messages"
    assert request.parent_id == parent_id  # the caller's span
    assert request.attributes["http.response.status_code"] == 200
    [run] = [s for s in spans if s.name == "invoke_agent"]
    assert request.span_id in _ancestors(run, spans)  # the run is the request's work
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["stateloop.stop_reason"] == "end_turn"
    steps = sorted((s for s in spans if s.parent_id == run.span_id), key=lambda s: s.start)
    assert [s.name for s in steps] == ["step 1", "step 2"]
    assert run.start <= steps[0].start and steps[-1].end <= run.end <= request.end
    under = {step.name: sorted((s for s in spans if s.parent_id == step.span_id),
                               key=lambda s: s.start) for step in steps}
    assert [s.name for s in under["step 1"]] == ["chat gpt-4o-mini", "execute_tool shout",
                                                 "store commit"]
    assert [s.name for s in under["step 2"]] == ["chat gpt-4o-mini", "store commit"]
    chat, tool, commit = under["step 1"]
    assert tool.end <= commit.start < commit.end  # the step's write, after its work
    assert chat.kind == SPAN_KIND_CLIENT
    assert chat.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0
    assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert under["step 2"][0].attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert 0 < chat.attributes["gen_ai.server.time_to_first_token"] <= (
        chat.end - chat.start) / 1e9
    assert steps[0].start <= chat.start < chat.end <= tool.start < tool.end <= steps[0].end
    assert tool.attributes["gen_ai.tool.name"] == "shout" and tool.status != STATUS_ERROR
    assert run.attributes["gen_ai.usage.input_tokens"] == sum(
        step[0].attributes["gen_ai.usage.input_tokens"] for step in under.values())
    # Message contents are user data: not in a span unless the operator opts in.
    for span in spans:
        assert not {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
                    "gen_ai.output.messages"} & span.attributes.keys()


def _ancestors(span: Span, spans: list[Span]) -> list[str]:
    by_id = {s.span_id: s for s in spans}
    found = []
    while span.parent_id in by_id:
        span = by_id[span.parent_id]
        found.append(span.span_id)
    return found


def test_message_contents_only_when_the_operator_opts_in(cli: Cli, script: Script,
                                                         receiver: Receiver) -> None:
    _, _, spans = _traced_run(cli, script, receiver, {"STATELOOP_TRACE_CONTENT": "1"})
    [tool] = [s for s in spans if s.name == "execute_tool shout"]
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"text":"hi"}'
    assert tool.attributes["gen_ai.tool.call.result"] == "HI"
    answers = [s.attributes["gen_ai.output.messages"] for s in spans if s.name.startswith("chat")]
    assert any("It said HI." in answer for answer in answers)


def test_without_an_sdk_a_run_is_left_as_it_was() -> None:
    assert not tracing.tracing_on()  # this process configured no SDK
    config = LoopConfig(model=ScriptedModel([reply("hi")]), tools={},
                        build_context=lambda messages: messages)
    tracing.watch(config, "run-1", "agent-1")
    assert config.checkpoint is None and config.on_end is None


def test_the_environment_asks_for_traces_or_is_refused() -> None:
    assert tracing_wanted({}) == []
    assert tracing_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == ["otlp"]
    assert tracing_wanted({"OTEL_TRACES_EXPORTER": "console,otlp"}) == ["console", "otlp"]
    assert tracing_wanted({"OTEL_TRACES_EXPORTER": "none",
                           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == []
    assert tracing_wanted({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}) == []
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER: 'jaeger' is not one of"):
        tracing_wanted({"OTEL_TRACES_EXPORTER": "jaeger"})
