"""Tools created from source run out of process: a crash, a hang or a memory blowup fails
that call only; the server and the other calls of the step carry on."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from letta_client import Letta

from stateloop.testing.scripted import call, calls, reply
from stateloop.tools.sandbox import (
    SandboxedToolError,
    SandboxLimits,
    describe_source,
    run_source,
    sandboxed_tool,
)
from test_server_support import Script, new_agent

pytest_plugins = ["test_server_support"]  # its fixtures: fake, server, client, script

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


@pytest.mark.parametrize(("name", "error"), [
    ("crash", "ToolCrashed"), ("hang", "TimeoutError"), ("hog", "MemoryError")])
def test_sandbox_failures_are_errors_of_that_call(name: str, error: str) -> None:
    started = time.time()
    with pytest.raises(SandboxedToolError) as info:
        asyncio.run(_run(name))
    assert type(info.value).__name__ == error
    # Bounded, not a benchmark: far above the limits, far below "hangs forever".
    assert time.time() - started < 4 * LIMITS.timeout + 10


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
    returns = {m.name: m for m in response.messages if m.message_type == "tool_return_message"}
    assert returns["double"].status == "success" and returns["double"].tool_return == "8"
    for name, error in (("crash", "ToolCrashed"), ("hang", "TimeoutError"),
                        ("hog", "MemoryError")):
        assert returns[name].status == "error", name
        assert error in returns[name].tool_return, returns[name].tool_return
    assert response.stop_reason.stop_reason == "end_turn"
    assert client.health().status == "ok"  # the server itself is unharmed
