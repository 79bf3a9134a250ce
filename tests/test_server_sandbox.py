"""Tools created from source run out of process: a crash, a hang or a memory blowup fails
that call only; the server and the other calls of the step carry on."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from letta_client import APIStatusError, Letta

from stateloop.errors import ToolDefinitionError
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, calls, reply
from stateloop.tools import Tool
from stateloop.tools.bwrap import package_root
from stateloop.tools.sandbox import (
    Isolation,
    SandboxedToolError,
    SandboxLimits,
    describe_source,
    run_source,
    sandboxed_tool,
)
from test_server_support import (  # noqa: F401 (fixtures)
    Script,
    Server,
    client,
    fake,
    new_agent,
    script,
    server,
    settings_for,
)

TOOLS = {
    "crash": "def crash() -> str:\n    \"\"\"Die.\"\"\"\n    import os\n    os.abort()\n",
    "hang": "def hang() -> str:\n    \"\"\"Never return.\"\"\"\n    while True:\n        pass\n",
    "hog": ("def hog() -> str:\n    \"\"\"Allocate without bound.\"\"\"\n    chunks = []\n"
            "    while True:\n        chunks.append(bytearray(50_000_000))\n"),
    "double": "def double(n: int) -> int:\n    \"\"\"Twice n.\"\"\"\n    return 2 * n\n",
}

LIMITS = SandboxLimits(timeout=1.5, memory_mb=256)


async def _run(name: str, **arguments: Any) -> str:
    return await run_source(TOOLS[name], name, arguments, LIMITS)


def test_sandbox_returns_values_and_validates_arguments() -> None:
    assert asyncio.run(_run("double", n=21)) == "42"
    with pytest.raises(SandboxedToolError, match="valid integer"):
        asyncio.run(_run("double", n="many"))
    schema = describe_source(TOOLS["double"], "double")
    assert schema["parameters"]["required"] == ["n"] and schema["description"] == "Twice n."


def test_a_package_under_tmp_is_seen_through_the_sandbox_s_own_tmp(tmp_path: Path) -> None:
    # The sandbox mounts a tmpfs of its own on /tmp: an installation under /tmp (a checkout,
    # a virtualenv, CI's clone) must still be there for the child.
    copy = tmp_path / "src"
    shutil.copytree(package_root(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    script = ("import asyncio\n"
              "from stateloop.tools.sandbox import run_source\n"
              f"print(asyncio.run(run_source({TOOLS['double']!r}, 'double', {{'n': 21}})))\n")
    done = subprocess.run([sys.executable, "-c", script], env={"PYTHONPATH": str(copy)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "42"), done.stderr[-2000:]


# Only the hang is stopped by the clock, so only the hang gets a short timeout. A crash and a
# memory blowup must fail for their own reason however long the worker takes to start (the
# timeout bounds its start too) or to fault in memory on a busy machine: with a timeout far
# beyond both, a TimeoutError there means the crash or the memory limit was not what
# stopped the call.
@pytest.mark.parametrize(("name", "error", "limits"), [
    ("crash", "ToolCrashed", SandboxLimits(timeout=60, memory_mb=256)),
    ("hang", "TimeoutError", LIMITS),
    ("hog", "MemoryError", SandboxLimits(timeout=60, memory_mb=256))])
def test_sandbox_failures_are_errors_of_that_call(name: str, error: str,
                                                  limits: SandboxLimits) -> None:
    started = time.monotonic()
    with pytest.raises(SandboxedToolError) as info:
        asyncio.run(run_source(TOOLS[name], name, {}, limits))
    assert type(info.value).__name__ == error, info.value
    # Bounded, not a benchmark: far above the limit, far below "hangs forever".
    assert time.monotonic() - started < 4 * limits.timeout + 10


def test_sandboxed_tool_refuses_unknown_arguments_before_spawning() -> None:
    tool = sandboxed_tool(TOOLS["double"], {"name": "double", "description": "Twice n.",
                                            "parameters": {"type": "object",
                                                           "properties": {"n": {}},
                                                           "required": ["n"]}})
    assert tool.arguments_model is not None
    with pytest.raises(ValueError, match="extra"):
        tool.arguments_model.model_validate({"n": 1, "m": 2})


def test_failing_tools_fail_only_their_own_calls(client: Letta, script: Script) -> None:
    for source in TOOLS.values():
        client.tools.upsert(source_code=source)
    agent = new_agent(client, tools=list(TOOLS))
    script.set(calls(call("crash"), call("hang"), call("hog"), call("double", n=4)),
               reply("Survived."))
    response = client.agents.messages.create(agent.id, input="try everything")
    [called] = [m for m in response.messages if m.message_type == "tool_call_message"]
    names = {c.tool_call_id: c.name for c in called.tool_calls}  # type: ignore[union-attr]
    [results] = [m for m in response.messages if m.message_type == "tool_return_message"]
    returns = {names[r.tool_call_id]: r for r in results.tool_returns}  # type: ignore
    assert returns["double"].status == "success" and returns["double"].tool_return == "8"
    for name, error in (("crash", "ToolCrashed"), ("hang", "TimeoutError"),
                        ("hog", "MemoryError")):
        assert returns[name].status == "error", name
        assert error in returns[name].tool_return, returns[name].tool_return
    assert response.stop_reason.stop_reason == "end_turn"
    assert client.health().status == "ok"  # the server itself is unharmed


def test_schema_is_read_from_the_source_as_from_the_function() -> None:
    source = '''
from typing import Literal, Optional

def plan(city: str, days: int, budget: float | None = None, tags: list[str] = [],
         weights: dict[str, float] = {}, mode: Literal["walk", "drive"] = "walk",
         note: Optional[str] = None, fast: bool = False) -> str:
    """Plan a trip.

    Args:
        city: Where to go.
        days: How long.
    """
    return city
'''
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    expected = Tool.from_function(namespace["plan"])
    schema = describe_source(source)
    assert schema["description"] == expected.description == "Plan a trip."
    assert schema["parameters"] == expected.parameters


@pytest.mark.parametrize(("source", "problem"), [
    ("class Spot:\n    pass\n\ndef go(to: Spot) -> str:\n    return ''\n",
     "'Spot' cannot be read without running the source"),
    ("def go(to) -> str:\n    return ''\n", "has no type hint"),
    ("def go(*places: str) -> str:\n    return ''\n", "*args/**kwargs"),
    ("def go(n: int = len('ab')) -> str:\n    return ''\n", "is not a literal"),
])
def test_schema_refuses_what_it_cannot_read_without_running(source: str, problem: str) -> None:
    with pytest.raises(ToolDefinitionError, match=re.escape(problem)):
        describe_source(source)


def test_a_tool_on_the_network_allow_list_reaches_the_network() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    source = (f"def ping() -> str:\n    import socket\n    try:\n"
              f"        socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
              f"    except OSError as exc:\n        return type(exc).__name__\n"
              f"    return 'connected'\n")
    with listener:
        assert asyncio.run(run_source(source, "ping", {}, LIMITS,
                                      Isolation(network=True))) == "connected"
        assert asyncio.run(run_source(source, "ping", {}, LIMITS)) == "ConnectionRefusedError"


def test_without_bubblewrap_source_tools_are_refused(fake: FakeOpenAI, tmp_path: Path,
                                                     script: Script,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "db.sqlite"
    with Server(settings_for(fake, db)) as server:  # created where bubblewrap works
        client = Letta(base_url=server.url, api_key="x", max_retries=0)
        client.tools.create(source_code=TOOLS["double"])
        agent = new_agent(client, tools=["double"])
    with Server(settings_for(fake, db, tool_bwrap=str(tmp_path / "no-bwrap"))) as server:
        assert any("tools created from source are disabled" in r.getMessage()
                   for r in caplog.records)  # said at start
        client = Letta(base_url=server.url, api_key="x", max_retries=0)
        with pytest.raises(APIStatusError) as info:
            client.tools.create(source_code=TOOLS["double"].replace("double", "triple"))
        assert info.value.status_code == 503
        assert "bubblewrap" in str(info.value) and "STATELOOP_UNSAFE_TOOLS=1" in str(info.value)
        script.set(call("double", n=2), reply("done"))
        response = client.agents.messages.create(agent.id, input="go")
    returns = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert returns[0].status == "error" and "disabled" in returns[0].tool_return


def test_without_bubblewrap_unsafe_tools_run_unisolated(fake: FakeOpenAI, tmp_path: Path,
                                                        script: Script,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    settings = settings_for(fake, tmp_path / "db.sqlite", tool_bwrap=str(tmp_path / "no-bwrap"),
                            unsafe_tools=True, tool_env={"GREETING": "hi"})
    source = ("def greet() -> str:\n    import os\n"
              "    return os.environ['GREETING'] + ' ' + str(os.environ.get('OPENAI_API_KEY'))\n")
    with Server(settings) as server:
        assert any("WITHOUT isolation" in r.getMessage() for r in caplog.records)
        client = Letta(base_url=server.url, api_key="x", max_retries=0)
        client.tools.create(source_code=source)
        agent = new_agent(client, tools=["greet"])
        script.set(call("greet"), reply("done"))
        response = client.agents.messages.create(agent.id, input="go")
    returns = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert returns[0].status == "success" and returns[0].tool_return == "hi None"
