"""Runs one tool call and turns whatever happens into a result the model can read."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import time
import traceback
import weakref
from collections.abc import Awaitable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json

from ..eager import first_step
from ..messages import Message, ToolCall, tool_result
from ..surrogates import replace_lone_surrogates
from .base import Tool, ToolContext

# Letta's cap on an error's text, and the note that ends a return cut to its tool's limit.
ERROR_CHAR_LIMIT = 1000
TRUNCATED_NOTE = ("... [NOTE: function output was truncated since it exceeded the character "
                  "limit ({length} > {limit})]")


@dataclass(slots=True)
class ToolOutput:
    """What a call produced: the text the model sees, and whether it failed; ``stdout`` and
    ``stderr`` are what the tool printed (for a failure, its traceback), as Letta's tool
    returns carry them. A tool may return one to say all of this itself."""

    text: str
    is_error: bool = False
    stdout: list[str] | None = None
    stderr: list[str] | None = None
    metadata: dict[str, Any] | None = None  # kept on the tool message as is


def result_message(call: ToolCall, output: ToolOutput) -> Message:
    """The tool message answering ``call``; what the tool printed goes in its metadata
    (lone surrogates as U+FFFD, as in its text)."""
    message = tool_result(call, output.text, is_error=output.is_error)
    for name in ("stdout", "stderr"):
        if value := getattr(output, name):
            message.metadata[name] = [replace_lone_surrogates(text) for text in value]
    if output.metadata:
        message.metadata.update(output.metadata)
    return message


def error_text(tool_name: str, error_type: str, message: str) -> str:
    """A failed call's text, in Letta's words."""
    return f"Error executing function {tool_name}: {error_type}: {message}"[:ERROR_CHAR_LIMIT]


def truncated(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters, with Letta's note saying so."""
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + TRUNCATED_NOTE.format(length=len(text), limit=limit)


async def execute_tool(call: ToolCall, arguments: dict[str, Any], tools: Mapping[str, Tool],
                       agent: Any = None) -> ToolOutput:
    """Validate ``arguments`` and run the tool; every failure becomes an error output."""
    if call.parse_error is not None:
        return ToolOutput(f"Tool call to {call.name!r} was not executed: {call.parse_error}. "
                          f"Received: {_preview(call.raw_arguments or '')}", True)
    tool = tools.get(call.name)
    if tool is None:
        available = ", ".join(tools) or "none"
        return ToolOutput(f"Tool {call.name!r} does not exist. Available tools: {available}.", True)
    if tool.function is None:
        return ToolOutput(f"Tool {call.name!r} has no Python function to run here.", True)
    if tool.arguments_model is None:  # checked where it runs (an MCP server, say)
        kwargs = dict(arguments)
    else:
        try:
            validated = tool.arguments_model.model_validate(arguments)
        except ValueError as exc:  # pydantic's ValidationError
            return ToolOutput(_describe_invalid(tool.name, exc, arguments), True)
        kwargs = dict(validated.__dict__)
    if tool.context_parameter is not None:
        kwargs[tool.context_parameter] = ToolContext(agent, call)
    try:
        if tool.is_async:
            finished, value = _start(tool.function(**kwargs), tool.timeout)
            if not finished:
                value = await value
        else:
            # Sync tools run in a worker thread so a slow one cannot stall other agents.
            value = await _within(asyncio.get_running_loop().run_in_executor(
                None, functools.partial(tool.function, **kwargs)), tool.timeout)
    except TimeoutError:
        return ToolOutput(f"Tool {tool.name!r} timed out after {tool.timeout:g} s.", True)
    except Exception as exc:
        # A sandboxed tool's error carries the traceback from its own process.
        trace = getattr(exc, "traceback", None) or traceback.format_exc()
        return ToolOutput(error_text(tool.name, type(exc).__name__, str(exc)), True,
                          stdout=getattr(exc, "stdout", None), stderr=[trace])
    if isinstance(value, ToolOutput):
        value.text = truncated(value.text, tool.return_char_limit)
        return value
    return ToolOutput(truncated(format_return(value), tool.return_char_limit))


def _start(coro: Coroutine[Any, Any, Any], seconds: float | None) -> tuple[bool, Any]:
    """Start ``coro``: ``(True, its value)`` when it finishes without suspending (a tool that
    computes: no deadline to watch), else ``(False, the rest to await)``, which raises
    TimeoutError ``seconds`` after the start."""
    if seconds is None:
        return False, coro
    deadline = time.monotonic() + seconds
    finished, value = first_step(coro)
    return (True, value) if finished else (False, _within(value, deadline - time.monotonic()))


async def _within(awaitable: Awaitable[Any], seconds: float | None) -> Any:
    """``await awaitable``, raising TimeoutError after ``seconds`` (as asyncio.timeout
    does, without a timer of its own: see ``_Watchdog``)."""
    if seconds is None:
        return await awaitable
    task = asyncio.current_task()
    assert task is not None
    loop = task.get_loop()
    watchdog = _watchdogs.get(loop)
    if watchdog is None:
        watchdog = _watchdogs[loop] = _Watchdog(loop)
    cancelling = task.cancelling()
    key, expired = watchdog.watch(task, loop.time() + seconds)
    try:
        return await awaitable
    except asyncio.CancelledError:
        if expired[0] and task.uncancel() <= cancelling:
            raise TimeoutError from None
        raise
    finally:
        watchdog.unwatch(key)


class _Watchdog:
    """Tool-call deadlines of one event loop behind a single timer, re-armed lazily: a call
    that finishes in time costs a dict entry instead of scheduling and cancelling a timer."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._calls: dict[int, tuple[float, asyncio.Task[Any], list[bool]]] = {}
        self._keys = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, task: asyncio.Task[Any], deadline: float) -> tuple[int, list[bool]]:
        """Cancel ``task`` at ``deadline``; the list's flag tells the timeout apart."""
        key, expired = next(self._keys), [False]
        self._calls[key] = (deadline, task, expired)
        if self._timer is None or deadline < self._timer.when():
            self._arm(deadline)
        return key, expired

    def unwatch(self, key: int) -> None:
        self._calls.pop(key, None)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(when, self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = self._loop.time()
        for key, (deadline, task, expired) in list(self._calls.items()):
            if deadline <= now:
                del self._calls[key]
                expired[0] = True
                task.cancel()
        if self._calls:
            self._arm(min(deadline for deadline, _, _ in self._calls.values()))


_watchdogs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = (
    weakref.WeakKeyDictionary())


def format_return(value: Any) -> str:
    """``str`` as is; anything else as JSON (pydantic models, dataclasses and dates included)."""
    if isinstance(value, str):
        return value
    try:
        return to_json(value).decode()
    except Exception:
        return str(value)


def _describe_invalid(tool_name: str, exc: Any, arguments: dict[str, Any]) -> str:
    problems = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(part) for part in err["loc"]) or "arguments"
        if err["type"] == "missing":
            problems.append(f"{field!r} is required but missing")
        elif err["type"] == "extra_forbidden":
            problems.append(f"{field!r} is not a parameter of this tool")
        else:
            problems.append(f"{field!r}: {err['msg']} (received {_preview_value(err['input'])})")
    return (f"Invalid arguments for tool {tool_name!r}: {'; '.join(problems)}. "
            f"Arguments received: {_preview(json.dumps(arguments, default=str))}")


def _preview_value(value: Any) -> str:
    return _preview(json.dumps(value, default=str))


def _preview(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
