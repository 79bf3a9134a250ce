"""Letta's ``run_code`` (and ``run_code_with_tools``) through the server with letta-client:
called by a scripted model, run in the real bubblewrap sandbox, with no network, none of the
server's files or variables, a time limit, and workers that stay warm until their agent goes."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from letta_client import Letta

from builtins_support import (
    Site,
    call_tool,
    html_answer,
    site,  # noqa: F401 (fixtures)
)
from stateloop.testing.scripted import call, reply
from stateloop.tools.worker import CHILD_SCRIPT
from test_server_support import Script, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

# -- run_code --------------------------------------------------------------------------------

def test_run_code_python_reports_as_lettas_interpreter(client: Letta, script: Script) -> None:
    code = "import sys\nprint('hello')\nprint('careful', file=sys.stderr)\nsum(range(10))"
    returned = call_tool(client, script, "run_code", code=code, language="python")
    assert returned.status == "success"
    assert json.loads(returned.tool_return) == {
        "results": ["45"], "logs": {"stdout": ["hello\n"], "stderr": ["careful\n"]}}


def test_run_code_python_error_names_the_exception(client: Letta, script: Script) -> None:
    returned = call_tool(client, script, "run_code", code="x = 1\nx / 0", language="python")
    report = json.loads(returned.tool_return)
    assert report["error"]["name"] == "ZeroDivisionError"
    assert "division by zero" in report["error"]["value"]
    assert "ZeroDivisionError" in report["logs"]["stderr"][0]


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_run_code_javascript(client: Letta, script: Script) -> None:
    returned = call_tool(client, script, "run_code",
                         code="console.log([1, 2, 3].map(x => x * 2).join(','))",
                         language="js")
    assert json.loads(returned.tool_return) == {
        "results": [], "logs": {"stdout": ["2,4,6\n"], "stderr": []}}


@pytest.mark.parametrize(("language", "runtimes", "named"), [
    ("ts", ("tsx", "ts-node", "deno", "bun"), "TypeScript runtime"),
    ("r", ("Rscript",), "R (Rscript)"),
])
def test_run_code_names_a_missing_runtime(client: Letta, script: Script, language: str,
                                          runtimes: tuple[str, ...], named: str) -> None:
    if any(shutil.which(runtime) for runtime in runtimes):
        pytest.skip(f"{named} is installed here")
    returned = call_tool(client, script, "run_code", code="1", language=language)
    assert returned.status == "error"
    assert f"cannot run '{language}' code: " in returned.tool_return
    assert named in returned.tool_return and "not installed" in returned.tool_return


def test_run_code_has_no_network(client: Letta, script: Script, site: Site) -> None:
    site.routes["/x"] = html_answer("reached")
    code = ("import urllib.request\n"
            f"urllib.request.urlopen({site.url + '/x'!r}, timeout=5).read()")
    returned = call_tool(client, script, "run_code", code=code, language="python")
    report = json.loads(returned.tool_return)
    assert report["error"]["name"] == "URLError"
    assert site.requests == []


def test_run_code_sees_no_server_file_or_variable(client: Letta, script: Script,
                                                 tmp_path: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    monkeypatch.setenv("STATELOOP_TEST_SECRET", "s3cret")  # the server's process has it
    code = f"import os\nprint(sorted(os.environ))\nopen({str(secret)!r}).read()"
    returned = call_tool(client, script, "run_code", code=code, language="python")
    report = json.loads(returned.tool_return)
    assert "STATELOOP_TEST_SECRET" not in report["logs"]["stdout"][0]
    assert report["error"]["name"] == "FileNotFoundError"
    assert "s3cret" not in returned.tool_return


def test_run_code_stops_a_program_at_its_time_limit(client: Letta, script: Script) -> None:
    start = time.monotonic()
    returned = call_tool(client, script, "run_code", code="print('started')\nwhile True: pass",
                         language="python")
    assert time.monotonic() - start < 30  # the test server's tool timeout is 6 s
    report = json.loads(returned.tool_return)
    assert report["error"]["name"] == "TimeoutError"
    assert "stopped" in report["error"]["value"]


def _my_workers() -> set[int]:
    """The sandbox zygotes descending from this test process."""
    parents: dict[int, int] = {}
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
        if CHILD_SCRIPT.encode() in cmdline:
            found.add(int(entry.name))
    mine = set()
    for pid in found:
        ancestor = pid
        while ancestor > 1 and ancestor != os.getpid():
            ancestor = parents.get(ancestor, 0)
        if ancestor == os.getpid():
            mine.add(pid)
    return mine


def test_run_code_workers_stay_warm_and_stop_when_their_agent_is_deleted(
        client: Letta, script: Script) -> None:
    before = _my_workers()
    agent = new_agent(client, tools=["run_code"])
    seen = []
    for value in (1, 2):
        script.set(call("run_code", code=f"{value} * 10", language="python"), reply("done"))
        response = client.agents.messages.create(agent.id, input="go")
        returned = next(m for m in response.messages
                        if m.message_type == "tool_return_message")
        assert json.loads(returned.tool_return)["results"] == [str(value * 10)]
        seen.append(_my_workers() - before)
    assert seen[0] and seen[0] & seen[1]  # the second call ran in the first one's sandbox
    warm = seen[1]
    client.agents.delete(agent.id)
    deadline = time.monotonic() + 60
    while _my_workers() & warm and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _my_workers() & warm


def test_run_code_with_tools_is_refused_with_the_reason(client: Letta, script: Script) -> None:
    returned = call_tool(client, script, "run_code_with_tools", code="print(1)")
    assert returned.status == "error"
    assert "run_code_with_tools is not available on this server" in returned.tool_return
    assert "run_code" in returned.tool_return
