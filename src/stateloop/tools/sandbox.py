"""Tools from Python source, run out of process.

Each call starts a fresh interpreter (``python -I -m stateloop.tools.sandbox``) that compiles
the source, validates the arguments and calls the function under a memory limit
(``RLIMIT_AS``), a CPU limit and a wall-clock timeout. A tool that crashes, hangs or
allocates without bound fails its own call and nothing else: the server never executes
the source itself.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import io
import json
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ToolDefinitionError
from .base import Tool

_OUTPUT_LIMIT = 1_000_000  # bytes of JSON a call may send back


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one call may use: seconds of wall-clock time and megabytes of address space."""

    timeout: float = 30.0
    memory_mb: int = 512


class SandboxedToolError(Exception):
    """A sandboxed call failed; subclasses carry the tool's own exception name."""


@functools.cache
def _error_type(name: str) -> type[SandboxedToolError]:
    # Named after the child's exception so the model reads "Error: ZeroDivisionError: ..."
    # exactly as it would for an in-process tool.
    clean = name if name.isidentifier() else "ToolError"
    return type(clean, (SandboxedToolError,), {})


def check_source(source_code: str, name: str | None = None) -> str:
    """Parse (never run) ``source_code``; the tool function's name, or a ToolDefinitionError."""
    try:
        tree = ast.parse(source_code)
        compile(tree, "<tool>", "exec")
    except SyntaxError as exc:
        raise ToolDefinitionError(f"source_code does not compile: line {exc.lineno}: "
                                  f"{exc.msg}") from exc
    defined = [node.name for node in tree.body
               if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    wanted = name or (defined[-1] if defined else None)
    if wanted is None or wanted not in defined:
        raise ToolDefinitionError(f"source_code defines no function named {wanted!r} "
                                  f"(it defines: {', '.join(defined) or 'none'})")
    return wanted


async def describe_source(source_code: str, name: str | None = None,
                          limits: SandboxLimits = SandboxLimits()) -> dict[str, Any]:
    """The tool's JSON schema (name, description, parameters), derived in the sandbox."""
    reply = await _run_child({"mode": "describe", "source": source_code, "name": name}, limits)
    if not reply.get("ok"):
        raise ToolDefinitionError(f"source_code cannot become a tool: {reply['message']}")
    schema: dict[str, Any] = reply["schema"]
    return schema


async def run_source(source_code: str, name: str, arguments: dict[str, Any],
                     limits: SandboxLimits = SandboxLimits()) -> str:
    """Call the tool in a fresh subprocess; its return value as text, or a SandboxedToolError."""
    reply = await _run_child({"mode": "call", "source": source_code, "name": name,
                              "arguments": arguments}, limits)
    if not reply.get("ok"):
        raise _error_type(reply.get("error_type", "ToolError"))(reply["message"])
    text: str = reply["result"]
    return text


def sandboxed_tool(source_code: str, schema: dict[str, Any], *,
                   limits: SandboxLimits = SandboxLimits(),
                   requires_approval: bool = False) -> Tool:
    """A ``Tool`` whose calls run ``source_code`` out of process; ``schema`` is Letta's
    ``json_schema`` (name, description, parameters)."""
    name = schema["name"]
    parameters = schema.get("parameters") or {"type": "object", "properties": {}}

    async def call(**fields: Any) -> str:
        arguments = {aliases[key]: value for key, value in fields.items()
                     if value is not _MISSING}
        return await run_source(source_code, name, arguments, limits)

    model, aliases = _passthrough_model(name, parameters)
    # The sandbox enforces the limit; the in-process timeout is only a backstop.
    return Tool(name, (schema.get("description") or "").strip(), parameters, call,
                arguments_model=model, timeout=limits.timeout + 10,
                requires_approval=requires_approval)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


def _passthrough_model(name: str, parameters: dict[str, Any]) -> tuple[Any, dict[str, str]]:
    """A model that checks argument names (required present, unknown refused) and leaves
    types to the sandbox, where the function's own hints validate them."""
    from pydantic import ConfigDict, Field, create_model

    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    fields: dict[str, Any] = {}
    aliases: dict[str, str] = {}
    for index, prop in enumerate(properties):
        key = f"p{index}"  # parameter names may shadow BaseModel attributes: alias them
        aliases[key] = prop
        fields[key] = (Any, Field(... if prop in required else _MISSING, alias=prop))
    extra: Literal["allow", "forbid"] = (
        "allow" if parameters.get("additionalProperties") is True else "forbid")
    model = create_model(f"{name}_sandbox_arguments",
                         __config__=ConfigDict(extra=extra, populate_by_name=False), **fields)
    return model, aliases


async def _run_child(request: dict[str, Any], limits: SandboxLimits) -> dict[str, Any]:
    payload = json.dumps({**request, "memory_mb": limits.memory_mb,
                          "cpu_seconds": int(limits.timeout) + 1}).encode()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-m", "stateloop.tools.sandbox",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        out, err = await asyncio.wait_for(process.communicate(payload), limits.timeout)
    except TimeoutError:
        _kill(process)
        await process.wait()
        return {"ok": False, "error_type": "TimeoutError",
                "message": f"the tool did not finish within {limits.timeout:g} s and was stopped"}
    except BaseException:
        _kill(process)  # cancelled (the run was cancelled): the child must not outlive it
        raise
    if len(out) > _OUTPUT_LIMIT:
        return {"ok": False, "error_type": "ToolError",
                "message": f"the tool returned {len(out)} bytes, over the {_OUTPUT_LIMIT} limit"}
    try:
        reply: dict[str, Any] = json.loads(out)
    except ValueError:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        code = process.returncode or 0
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return {"ok": False, "error_type": "ToolCrashed",
                "message": f"the tool process {how}" + (f": {' | '.join(tail)}" if tail else "")}
    return reply


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # the child's own session: only what we started


# -- the child ---------------------------------------------------------------------------


def _limit_resources(memory_mb: int, cpu_seconds: int) -> None:
    import resource

    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))


def _child(request: dict[str, Any]) -> dict[str, Any]:
    from .source import tool_from_source

    _limit_resources(int(request["memory_mb"]), int(request["cpu_seconds"]))
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            tool = tool_from_source(request["source"], name=request.get("name"))
            if request["mode"] == "describe":
                return {"ok": True, "schema": {"name": tool.name,
                                               "description": tool.description,
                                               "parameters": tool.parameters}}
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


if __name__ == "__main__":
    main()
