"""The sandboxed side of a source tool's call: one JSON request on stdin, one JSON reply on
stdout. Compiles the source, validates the arguments by the function's own hints and calls
it, under limits on memory, CPU time, file size and processes."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sys
from typing import Any

from .base import Tool


def _limit_resources(memory_mb: int, cpu_seconds: int, processes: int) -> None:
    import resource

    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    # Counted per user namespace, i.e. per call under bubblewrap. The kernel exempts uid 0
    # outside, so for a server running as root the PID namespace and the timeout bound it.
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def _child(request: dict[str, Any]) -> dict[str, Any]:
    from .source import tool_from_source

    _limit_resources(int(request["memory_mb"]), int(request["cpu_seconds"]),
                     int(request["processes"]))
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            tool = tool_from_source(request["source"], name=request.get("name"))
            return {"ok": True, "result": _call(tool, request.get("arguments") or {})}
    except BaseException as exc:  # the tool's failure is the call's answer
        return {"ok": False, "error_type": type(exc).__name__, "message": str(exc) or repr(exc)}


def _call(tool: Tool, arguments: dict[str, Any]) -> str:
    from pydantic import ValidationError

    from .execution import format_return

    assert tool.function is not None and tool.arguments_model is not None
    try:
        validated = tool.arguments_model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        raise TypeError(f"invalid arguments for tool {tool.name!r}: {problems}") from None
    kwargs = dict(validated.__dict__)
    value = tool.function(**kwargs)
    if asyncio.iscoroutine(value):
        value = asyncio.run(value)
    return format_return(value)


def main() -> None:
    """Child entry point: one JSON request on stdin, one JSON reply on stdout."""
    request = json.loads(sys.stdin.buffer.read())
    reply = _child(request)
    try:
        text = json.dumps(reply)
    except (TypeError, ValueError) as exc:
        text = json.dumps({"ok": False, "error_type": "ToolError",
                           "message": f"the tool's reply is not JSON: {exc}"})
    sys.stdout.write(text)
    sys.stdout.flush()
