"""Tools from Python source, run isolated, one fresh process per call.

Each call runs ``python -I`` in a bubblewrap sandbox (see ``bwrap.py``): no server secrets,
no server files, no network unless allowed, no host process to signal, a process tree that
dies with the call. Inside, the child (``sandbox_child.py``) runs under memory, CPU and
process limits; outside, a wall-clock timeout and bounded reads of its output. A tool that
crashes, hangs, floods its output or allocates without bound fails its own call and nothing
else. Without bubblewrap, calls run only when explicitly allowed (``Isolation(bwrap=None)``),
as a plain subprocess with the same limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ToolDefinitionError
from .base import Tool
from .bwrap import bwrap_command, package_root
from .source_schema import find_function, parse_source, schema_from_source

_CHUNK = 64 * 1024
# -I: no PYTHON* variables, no user site; the package path comes as an argument.
_BOOTSTRAP = ("import sys; sys.path.insert(0, sys.argv[1]); "
              "from stateloop.tools.sandbox_child import main; main()")


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one call may use: seconds of wall-clock time, megabytes of address space per
    process, bytes on each of stdout and stderr, processes, and megabytes in its /tmp."""

    timeout: float = 30.0
    memory_mb: int = 512
    output_bytes: int = 1_000_000
    processes: int = 64
    tmp_mb: int = 64


@dataclass(frozen=True, slots=True)
class Isolation:
    """How calls are isolated: ``bwrap`` names the bubblewrap executable, or is None for a
    plain subprocess (no isolation but the limits); ``env`` is all the environment the tool
    gets; ``network`` shares the host's network (off: only the sandbox's own loopback);
    ``own_uid`` gives each call a uid of its own (default: when running as root; see
    ``bwrap_mode``)."""

    bwrap: str | None = "bwrap"
    env: Mapping[str, str] = field(default_factory=dict)
    network: bool = False
    own_uid: bool | None = None


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
    return find_function(parse_source(source_code), name).name


def describe_source(source_code: str, name: str | None = None) -> dict[str, Any]:
    """The tool's JSON schema (name, description, parameters), read from the source's syntax
    tree: nothing runs."""
    try:
        return schema_from_source(source_code, name)
    except ToolDefinitionError as exc:
        raise ToolDefinitionError(f"source_code cannot become a tool: {exc}") from None


async def run_source(source_code: str, name: str, arguments: dict[str, Any],
                     limits: SandboxLimits = SandboxLimits(),
                     isolation: Isolation = Isolation()) -> str:
    """Call the tool in a fresh sandbox; its return value as text, or a SandboxedToolError."""
    reply = await _run_child({"source": source_code, "name": name, "arguments": arguments},
                             limits, isolation)
    if not reply.get("ok"):
        raise _error_type(reply.get("error_type", "ToolError"))(reply["message"])
    text: str = reply["result"]
    return text


def sandboxed_tool(source_code: str, schema: dict[str, Any], *,
                   limits: SandboxLimits = SandboxLimits(),
                   isolation: Isolation = Isolation(),
                   requires_approval: bool = False) -> Tool:
    """A ``Tool`` whose calls run ``source_code`` out of process; ``schema`` is Letta's
    ``json_schema`` (name, description, parameters)."""
    name = schema["name"]
    parameters = schema.get("parameters") or {"type": "object", "properties": {}}

    async def call(**fields: Any) -> str:
        arguments = {aliases[key]: value for key, value in fields.items()
                     if value is not _MISSING}
        return await run_source(source_code, name, arguments, limits, isolation)

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


async def _run_child(request: dict[str, Any], limits: SandboxLimits,
                     isolation: Isolation) -> dict[str, Any]:
    payload = json.dumps({**request, "memory_mb": limits.memory_mb,
                          "cpu_seconds": int(limits.timeout) + 1,
                          "processes": limits.processes}).encode()
    argv = [sys.executable, "-I", "-c", _BOOTSTRAP, package_root()]
    with contextlib.ExitStack() as cleanup:
        if isolation.bwrap is not None:
            bwrap = shutil.which(isolation.bwrap) or isolation.bwrap
            command = bwrap_command(bwrap, argv, env=isolation.env, network=isolation.network,
                                    tmp_bytes=limits.tmp_mb * 1024 * 1024,
                                    own_uid=isolation.own_uid)
            env: dict[str, str] = {}
            cwd = None
        else:  # unisolated, as explicitly allowed: still no server environment
            cwd = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="stateloop-tool-"))
            command = argv
            env = {"HOME": cwd, "TMPDIR": cwd, "PATH": "/usr/local/bin:/usr/bin:/bin",
                   **isolation.env}
        process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, env=env, cwd=cwd)
        return await _exchange(process, payload, limits)
    raise AssertionError("unreachable")  # for mypy: ExitStack may swallow exceptions


class _OutputLimitExceeded(Exception):
    def __init__(self, stream: str, limit: int) -> None:
        super().__init__(f"the tool wrote more than {limit} bytes to {stream}; the call was "
                         f"stopped (limit: STATELOOP_TOOL_OUTPUT_BYTES)")


async def _read_bounded(stream: asyncio.StreamReader | None, name: str, limit: int) -> bytes:
    """All of ``stream`` in chunks, or _OutputLimitExceeded the moment it passes ``limit``."""
    assert stream is not None
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise _OutputLimitExceeded(name, limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def _feed(process: asyncio.subprocess.Process, payload: bytes) -> None:
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(payload)
        await process.stdin.drain()
    process.stdin.close()


async def _exchange(process: asyncio.subprocess.Process, payload: bytes,
                    limits: SandboxLimits) -> dict[str, Any]:
    """Send the request, read the reply and the errors concurrently, under the limits."""
    tasks = [asyncio.ensure_future(_feed(process, payload)),
             asyncio.ensure_future(_read_bounded(process.stdout, "stdout", limits.output_bytes)),
             asyncio.ensure_future(_read_bounded(process.stderr, "stderr", limits.output_bytes))]

    async def finish() -> tuple[bytes, bytes]:
        _, out, err = await asyncio.gather(*tasks)
        await process.wait()
        return out or b"", err or b""

    failure: tuple[str, str] | None = None
    try:
        out, err = await asyncio.wait_for(finish(), limits.timeout)
    except TimeoutError:
        failure = ("TimeoutError", f"the tool did not finish within {limits.timeout:g} s and "
                                   f"was stopped")
    except _OutputLimitExceeded as exc:
        failure = ("OutputLimitExceeded", str(exc))
    except BaseException:  # cancelled (the run was): kill now, reap in the background
        _kill(process)
        _reaping.add(reaping := asyncio.ensure_future(_reap(process, tasks)))
        reaping.add_done_callback(_reaping.discard)
        raise
    if failure is not None:
        await _reap(process, tasks)
        return {"ok": False, "error_type": failure[0], "message": failure[1]}
    return _reply(out, err, process.returncode or 0)


_reaping: set[asyncio.Future[None]] = set()


async def _reap(process: asyncio.subprocess.Process,
                tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Kill what is left of the call and read its pipes to the end, so they close (bounded:
    without bubblewrap a process that left the call's session may hold them open)."""
    _kill(process)  # nothing of the call outlives it
    for task in tasks:
        task.cancel()

    async def drain() -> None:
        for stream in (process.stdout, process.stderr):  # its writers are dead: both end
            while stream is not None and await stream.read(_CHUNK):
                pass
        await process.wait()

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(drain(), 5)


def _reply(out: bytes, err: bytes, code: int) -> dict[str, Any]:
    try:
        reply: dict[str, Any] = json.loads(out)
    except ValueError:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return {"ok": False, "error_type": "ToolCrashed",
                "message": f"the tool process {how}" + (f": {' | '.join(tail)}" if tail else "")}
    return reply


def _kill(process: asyncio.subprocess.Process) -> None:
    # The child's own session: only what we started. Under bubblewrap its death takes the
    # sandbox's init, and with it every process of the call's PID namespace.
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
