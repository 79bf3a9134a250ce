"""One session per MCP server per event loop: opened lazily, reopened after it dies.

The SDK's client must be entered and left in one task, so each session lives in a task
of its own that holds the client open; calls from any task go through it. When the
connection drops (a stdio server that exits, say), the calls in flight fail with
``MCPConnectionError`` and the next call opens a new session.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..errors import StateloopError

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult
    from mcp.types import Tool as MCPTool

    from .config import MCPTools

OPEN_TIMEOUT = 60.0  # seconds a server may take to start and answer the handshake
CLOSE_GRACE = 5.0  # seconds a closing session may take before its task is cancelled
STDERR_TAIL = 600  # characters of a stdio server's stderr quoted when it fails


class MCPConnectionError(StateloopError):
    """An MCP server could not be reached, or dropped the connection during a call."""


class _Session:
    """A task holding one SDK client open until ``close``; ``client`` is set while it is."""

    def __init__(self, server: MCPTools) -> None:
        self.server = server
        self.client: Client | None = None
        self.dead = False
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Where a stdio server's stderr goes, quoted when it fails; closed with the session.
        self._errlog = (tempfile.TemporaryFile("w+")  # noqa: SIM115
                        if server.transport == "stdio" else None)

    async def open(self) -> None:
        ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp:{self.server.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), OPEN_TIMEOUT)
        except TimeoutError:
            tail = self.stderr_tail()
            await self.close()
            raise MCPConnectionError(f"MCP server {self.server.name!r} did not answer within "
                                     f"{OPEN_TIMEOUT:g} s{tail}") from None
        except BaseException:
            await self.close()
            raise

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        from mcp import Client

        try:
            async with Client(self._transport()) as client:
                self.client = client
                ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(MCPConnectionError(
                    f"cannot connect to MCP server {self.server.name!r}: "
                    f"{describe(exc)}{self.stderr_tail()}"))
        finally:
            self.dead = True
            self.client = None
            if not ready.done():
                ready.set_exception(MCPConnectionError(
                    f"MCP server {self.server.name!r}: the connection was closed while opening"))

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        server = self.server
        if server.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(command=server.command, args=list(server.args),
                                           env=dict(server.env) or None)
            async with stdio_client(params, errlog=self._errlog) as streams:  # type: ignore[arg-type]
                yield streams
            return
        if server.transport == "sse":
            from mcp.client.sse import sse_client

            async with sse_client(server.url, headers=dict(server.headers)) as streams:
                yield streams
            return
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        # The SDK's own defaults: a response stream may stay open for minutes.
        http = httpx2.AsyncClient(headers=dict(server.headers),
                                  timeout=httpx2.Timeout(30, read=300))
        async with http, streamable_http_client(server.url, http_client=http) as streams:
            yield streams

    def stderr_tail(self) -> str:
        """The end of what a stdio server wrote to stderr, quoted for an error message."""
        if self._errlog is None:
            return ""
        try:
            self._errlog.flush()
            self._errlog.seek(0)
            text = self._errlog.read().strip()
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends with: {text[-STDERR_TAIL:]}" if text else ""

    async def close(self) -> None:
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), CLOSE_GRACE)
            except (TimeoutError, Exception):
                task.cancel()
        if self._errlog is not None:
            self._errlog.close()


# Sessions by event loop, then by connection: a loop's streams cannot serve another loop.
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, _Session]] = (
    weakref.WeakKeyDictionary())
_opening: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Any, asyncio.Lock]] = (
    weakref.WeakKeyDictionary())


async def session(server: MCPTools) -> _Session:
    """The live session for ``server`` in this loop, opened (or reopened) when needed."""
    loop = asyncio.get_running_loop()
    sessions = _sessions.setdefault(loop, {})
    key = server.key()
    found = sessions.get(key)
    if found is not None and not found.dead:
        return found
    lock = _opening.setdefault(loop, {}).setdefault(key, asyncio.Lock())
    async with lock:
        found = sessions.get(key)
        if found is not None and not found.dead:
            return found
        if found is not None:
            del sessions[key]
            await found.close()
        fresh = _Session(server)
        await fresh.open()  # raises MCPConnectionError; nothing is kept
        sessions[key] = fresh
        return fresh


async def list_tools(server: MCPTools) -> list[MCPTool]:
    """Every tool the server offers (all pages)."""
    live = await session(server)
    assert live.client is not None
    try:
        listed = await live.client.list_tools()
    except Exception as exc:
        raise _failure(live, exc, "listing its tools") from exc
    return list(listed.tools)


async def call_tool(server: MCPTools, name: str, arguments: dict[str, Any]) -> CallToolResult:
    """Call ``name``; cancelling the caller cancels the request on the server."""
    live = await session(server)
    assert live.client is not None
    try:
        return await live.client.call_tool(name, arguments)
    except Exception as exc:
        raise _failure(live, exc, f"the call to {name!r}") from exc


def _failure(live: _Session, exc: Exception, during: str) -> Exception:
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED

    if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
        return exc  # the server answered with an error: the session is fine
    live.dead = True  # reopened by the next call
    return MCPConnectionError(
        f"MCP server {live.server.name!r} closed the connection during {during}: "
        f"{describe(exc)}{live.stderr_tail()}; it is restarted for the next call")


async def close(server: MCPTools) -> None:
    """Close ``server``'s session in this loop, if it has one."""
    found = _sessions.get(asyncio.get_running_loop(), {}).pop(server.key(), None)
    if found is not None:
        await found.close()


async def close_all() -> None:
    """Close every MCP session of this event loop."""
    sessions = _sessions.pop(asyncio.get_running_loop(), {})
    await asyncio.gather(*(found.close() for found in sessions.values()))


def describe(exc: BaseException) -> str:
    """An exception in a few words, looking inside the groups anyio wraps errors in."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    from mcp import MCPError

    if isinstance(exc, MCPError):
        text = exc.message
    return text
