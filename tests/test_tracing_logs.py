"""``STATELOOP_LOG_FORMAT=json``: ``stateloop serve`` logs one JSON object a line — a line
for each request and for each run's end — carrying the caller's trace id when tracing is on;
a format or exporter it does not know stops it before it starts."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

from letta_client import Letta

from fake_script import Script
from started import stop, wait_until_healthy
from stateloop.testing.scripted import reply
from test_cli_support import Cli, cli, console_script, fake, free_port, script  # noqa: F401 (fixtures)
from test_tracing import Receiver, receiver  # noqa: F401 (fixtures)


def _serve_and_send(cli: Cli, script: Script, env: dict[str, str | None], log: Path,
                    traceparent: str) -> tuple[str, str]:
    """``stateloop serve`` logging into ``log``; one message sent: (agent id, run id)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        process = subprocess.Popen([*console_script(), "serve", "--port", str(port)],
                                   env=cli.environment(env), stdout=out, stderr=out)
        try:
            wait_until_healthy(url, process, log.read_text)
            client = Letta(base_url=url, api_key="unused", max_retries=0, timeout=60)
            agent = client.agents.create(model="openai/gpt-4o-mini", include_base_tools=False,
                                         memory_blocks=[{"label": "human", "value": "Ada"}])
            script.set(reply("Hello."))
            client.agents.messages.create(agent.id, input="Hi",
                                          extra_headers={"traceparent": traceparent})
            [run] = client.runs.list(agent_id=agent.id).items
        finally:
            stop(process)
    return agent.id, run.id


def test_requests_and_runs_are_json_lines_with_the_trace_id(
        cli: Cli, script: Script, receiver: Receiver, tmp_path: Path) -> None:
    trace_id = secrets.token_hex(16)
    log = tmp_path / "server.log"
    agent_id, run_id = _serve_and_send(
        cli, script, {"STATELOOP_LOG_FORMAT": "json", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url},
        log, f"00-{trace_id}-{secrets.token_hex(8)}-01")
    # The server's lines (not the CLI's own console lines: its banner, "interrupted").
    lines: list[dict[str, Any]] = [json.loads(line) for line in log.read_text().splitlines()
                                   if line.startswith("{")]
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    [request] = [line for line in lines if line.get("path") == f"/v1/agents/{agent_id}/messages"]
    assert (request["method"], request["status"]) == ("POST", 200)
    assert request["trace_id"] == trace_id
    [ended] = [line for line in lines if line["logger"] == "stateloop.runs"]
    assert (ended["run_id"], ended["agent_id"], ended["stop_reason"], ended["steps"]) == (
        run_id, agent_id, "end_turn", 1)
    assert ended["input_tokens"] > 0 and ended["duration_ms"] > 0
    assert ended["trace_id"] == trace_id
    assert any(line["message"] == "Application startup complete." for line in lines)


def test_an_unknown_log_format_or_exporter_is_refused(cli: Cli) -> None:
    for variable, value, says in (
            ("STATELOOP_LOG_FORMAT", "yaml",
             "error: STATELOOP_LOG_FORMAT: Input should be 'text' or 'json'"),
            ("OTEL_TRACES_EXPORTER", "jaeger",
             "error: OTEL_TRACES_EXPORTER: 'jaeger' is not one of otlp, console or none")):
        done = cli("serve", "--port", str(free_port()), timeout=60, env={variable: value})
        assert done.returncode != 0 and done.stderr.strip().splitlines()[-1] == says, done.stderr
