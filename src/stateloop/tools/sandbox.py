"""Tools from Python source, run isolated: the public face of the sandbox.

Each call runs in a bubblewrap sandbox (see ``bwrap.py``): no server secrets, no server
files, no network unless allowed, no host process to signal, a process tree that dies with
the call. Inside, a zygote (``sandbox_child.py``) has loaded the tool once and forks a fresh
child per call, under memory, CPU and process limits; outside, a wall-clock timeout and
bounded reads of its output (``worker.py``). A tool that crashes, hangs, floods its output
or allocates without bound fails its own call and nothing else. With a ``WorkerPool``
(``pool.py``) workers stay warm between calls of one bound tool; without one, each call
starts a sandbox of its own and stops it after. Without bubblewrap, calls run only when
explicitly allowed (``Isolation(bwrap=None)``), as plain subprocesses with the same limits.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict, Field, create_model

from ..errors import ToolDefinitionError
from .base import Tool
from .execution import ToolOutput
from .pool import WorkerPool
from .source_schema import find_function, parse_source, schema_from_args, schema_from_source
from .worker import Worker, WorkerFailed, WorkerSpec


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one call may use: seconds of wall-clock time, megabytes of address space per
    process, bytes on each of stdout and stderr, processes, megabytes in its /tmp, and
    megabytes of memory all its processes hold together (the tool's loaded module and its
    /tmp included). That last bound is a cgroup where the host lets the server make one;
    elsewhere the process limit, and each process's address space if need be, are lowered
    so that their product stays within it (``confinement.memory_bound`` says which holds)."""

    timeout: float = 30.0
    memory_mb: int = 512
    output_bytes: int = 1_000_000
    processes: int = 64
    tmp_mb: int = 64
    call_memory_mb: int = 1024


@dataclass(frozen=True, slots=True)
class Isolation:
    """How calls are isolated: ``bwrap`` names the bubblewrap executable, or is None for a
    plain subprocess (no isolation but the limits); ``env`` is all the environment the tool
    gets; ``network`` shares the host's network (off: only the sandbox's own loopback);
    ``own_uid`` gives each worker a uid of its own (default: when running as root; see
    ``bwrap_mode``)."""

    bwrap: str | None = "bwrap"
    env: Mapping[str, str] = field(default_factory=dict)
    network: bool = False
    own_uid: bool | None = None


class SandboxedToolError(Exception):
    """A sandboxed call failed; subclasses carry the tool's own exception name, and
    ``traceback`` and ``stdout`` what the tool's process said."""

    traceback: str | None = None
    stdout: list[str] | None = None


@functools.cache
def _error_type(name: str) -> type[SandboxedToolError]:
    # Named after the child's exception so the model reads "...: ZeroDivisionError: ..."
    # exactly as it would for an in-process tool.
    clean = name if name.isidentifier() else "ToolError"
    return type(clean, (SandboxedToolError,), {})


def check_source(source_code: str, name: str | None = None) -> str:
    """Parse (never run) ``source_code``; the tool function's name, or a ToolDefinitionError."""
    return find_function(parse_source(source_code), name).name


def describe_source(source_code: str, name: str | None = None,
                    args_json_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tool's JSON schema (name, description, parameters), read from the source's syntax
    tree (nothing runs); ``args_json_schema``, when given, is the parameters'."""
    try:
        if args_json_schema:
            return schema_from_args(source_code, args_json_schema, name)
        return schema_from_source(source_code, name)
    except ToolDefinitionError as exc:
        raise ToolDefinitionError(f"source_code cannot become a tool: {exc}") from None


async def run_source(source_code: str, name: str, arguments: dict[str, Any],
                     limits: SandboxLimits = SandboxLimits(),
                     isolation: Isolation = Isolation()) -> str:
    """Call the tool in a sandbox of its own, stopped after; its return value as text, or
    a SandboxedToolError."""
    result = _result(await _call_once(WorkerSpec(source_code, name, limits, isolation),
                                      arguments))
    return result.text if isinstance(result, ToolOutput) else str(result)


def sandboxed_tool(source_code: str, schema: dict[str, Any], *,
                   limits: SandboxLimits = SandboxLimits(),
                   isolation: Isolation = Isolation(),
                   requires_approval: bool = False, return_char_limit: int | None = None,
                   pool: WorkerPool | None = None) -> Tool:
    """A ``Tool`` whose calls run ``source_code`` out of process; ``schema`` is Letta's
    ``json_schema`` (name, description, parameters). With ``pool``, its calls share warm
    workers of their own (the first call starts one; ``stop_workers`` stops them); without,
    each call starts a sandbox."""
    name = schema["name"]
    parameters = schema.get("parameters") or {"type": "object", "properties": {}}
    spec = WorkerSpec(source_code, name, limits, isolation)
    slot = pool.slot(spec) if pool is not None else None

    async def call(**fields: Any) -> Any:
        arguments = {aliases[key]: value for key, value in fields.items()
                     if value is not _MISSING}
        if pool is not None and slot is not None:
            return _result(await pool.call(slot, arguments))
        return _result(await _call_once(spec, arguments))

    if pool is not None and slot is not None:
        # Rebound or dropped: its workers stop, when collected or when told to.
        _stoppers[call] = weakref.finalize(call, pool.drop, slot)
    model, aliases = _passthrough_model(name, parameters)
    # The sandbox enforces the limit; the in-process timeout is only a backstop (a cold call
    # waits for its worker first).
    return Tool(name, (schema.get("description") or "").strip(), parameters, call,
                arguments_model=model, timeout=2 * limits.timeout + 10,
                requires_approval=requires_approval, return_char_limit=return_char_limit)


def stop_workers(tool: Tool) -> None:
    """Stop the warm workers of a tool made by ``sandboxed_tool`` (idle ones now, busy ones
    after their calls); its next call starts one again. Other tools: nothing to do."""
    stopper = _stoppers.get(tool.function)
    if stopper is not None:
        stopper()


def share_workers(tool: Tool, wrapper: Tool) -> None:
    """``wrapper`` calls ``tool``: ``stop_workers(wrapper)`` stops ``tool``'s workers."""
    stopper = _stoppers.get(tool.function)
    if stopper is not None:
        _stoppers[wrapper.function] = stopper


_stoppers: weakref.WeakKeyDictionary[Any, weakref.finalize] = weakref.WeakKeyDictionary()


async def _call_once(spec: WorkerSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    try:
        worker = await Worker.start(spec)
    except WorkerFailed as exc:
        return {"ok": False, "error_type": exc.error_type, "message": str(exc)}
    try:
        return await worker.call(arguments)
    except WorkerFailed as exc:
        return {"ok": False, "error_type": exc.error_type, "message": str(exc)}
    finally:
        await worker.close()


def _result(reply: dict[str, Any]) -> Any:
    """The call's return text (a ``ToolOutput`` when the tool printed something), or its
    error raised."""
    printed = [reply["stdout"]] if reply.get("stdout") else None
    if not reply.get("ok"):
        error = _error_type(reply.get("error_type", "ToolError"))(reply["message"])
        error.traceback, error.stdout = reply.get("traceback"), printed
        raise error
    text: str = reply["result"]
    return ToolOutput(text, stdout=printed) if printed else text


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


def _passthrough_model(name: str, parameters: dict[str, Any]) -> tuple[Any, dict[str, str]]:
    """A model that checks argument names (required present, unknown refused) and leaves
    types to the sandbox, where the function's own hints validate them."""
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
