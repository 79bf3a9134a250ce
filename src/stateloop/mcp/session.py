"""One session per MCP server per event loop: opened lazily, reopened after it dies.

The SDK's client must be entered and left in one task, so each session lives in a task
of its own that holds the client open; calls from any task go through it. When the
connection drops (a stdio server that exits, say), the calls in flight fail with
``MCPConnectionError`` and the next call opens a new session.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..errors import StateloopError
from ..tools.bwrap import bwrap_command, home_env, uses_own_uid
from ..tools.confinement import Lease

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult
    from mcp.types import Tool as MCPTool

    from .config import MCPTools

OPEN_TIMEOUT = 60.0  # seconds a server may take to start and answer the handshake
LIST_TIMEOUT = 30.0  # seconds a server may take to list its tools
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
        self.problems: list[str] = []  # why the connection was ended from this side
        self._home: tempfile.TemporaryDirectory[str] | None = None  # an unsandboxed cwd
        self._lease: Lease | None = None  # the sandbox's uid, held while the server runs

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
        from mcp import Client  # lazy: the MCP SDK loads on first use

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
            if self._lease is not None:  # the server's process is gone with the transport
                self._lease.release()
                self._lease = None
            if not ready.done():
                ready.set_exception(MCPConnectionError(
                    f"MCP server {self.server.name!r}: the connection was closed while opening"))

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        server = self.server
        if server.transport == "stdio":
            from .stdio import stdio_streams  # lazy: loads the MCP SDK

            argv, env, cwd = self._stdio_command()
            async with stdio_streams(argv, env=env, cwd=cwd, errlog=self._errlog,
                                     max_bytes=server.max_message_bytes,
                                     problems=self.problems) as pipes:
                yield pipes
            return
        import httpx2  # lazy: httpx2, for remote servers only

        from ..addresses import GuardedTransport  # lazy: its transport loads httpx2

        def client(headers: dict[str, str] | None = None, timeout: Any = None,
                   auth: Any = None) -> httpx2.AsyncClient:
            guarded = server.public_only or server.max_message_bytes is not None
            # The SDK's own defaults: a response stream may stay open for minutes.
            return httpx2.AsyncClient(
                headers=headers, auth=auth, timeout=timeout or httpx2.Timeout(30, read=300),
                transport=GuardedTransport(public_only=server.public_only,
                                           max_bytes=server.max_message_bytes,
                                           problems=self.problems)
                if guarded else None)

        if server.transport == "sse":
            from mcp.client.sse import sse_client  # lazy: the MCP SDK loads on first use

            async with sse_client(server.url, headers=dict(server.headers),
                                  httpx_client_factory=client) as streams:
                yield streams
            return
        from mcp.client.streamable_http import streamable_http_client  # lazy: the MCP SDK

        http = client(headers=dict(server.headers))
        async with http, streamable_http_client(server.url, http_client=http) as streams:
            yield streams

    def _stdio_command(self) -> tuple[list[str], dict[str, str], str | None]:
        """The command line, environment and directory a stdio server starts with: as the
        SDK starts it, or, with ``isolation``, in the sandbox with that environment alone."""
        server, isolation = self.server, self.server.isolation
        argv = [server.command, *server.args]
        if isolation is None:
            from mcp.client.stdio import get_default_environment  # lazy: the MCP SDK

            return argv, {**get_default_environment(), **server.env}, None
        env = {**isolation.env, **server.env}
        if isolation.bwrap is None:  # unisolated, as explicitly allowed: still no server env
            self._home = tempfile.TemporaryDirectory(prefix="stateloop-mcp-")
            home = self._home.name
            return argv, {**home_env(home), **env}, home
        bwrap = shutil.which(isolation.bwrap) or isolation.bwrap
        # An allowed command given by its path is readable in the sandbox, wherever it is.
        binds = [server.command] if os.path.isabs(server.command) else []
        if uses_own_uid(isolation.own_uid) and self._lease is None:
            self._lease = Lease.take()  # a uid no other sandbox on the host has
        return bwrap_command(bwrap, argv, env=env, network=isolation.network,
                             uid=self._lease.uid if self._lease else None,
                             binds=[path for path in binds if os.path.exists(path)]), {}, None

    def stderr_tail(self) -> str:
        """Why the connection was ended, and the end of what a stdio server wrote to stderr,
        for an error message."""
        if self.problems:
            return f"; {self.problems[0]}"
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
        if self._home is not None:
            self._home.cleanup()


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
    """Every tool the server offers (all pages), within ``LIST_TIMEOUT`` seconds; a server
    that takes longer is stopped."""
    live = await session(server)
    assert live.client is not None
    try:
        async with asyncio.timeout(LIST_TIMEOUT):
            listed = await live.client.list_tools()
    except TimeoutError:
        await _drop(live)
        raise MCPConnectionError(f"MCP server {server.name!r} did not list its tools within "
                                 f"{LIST_TIMEOUT:g} s; it was stopped") from None
    except Exception as exc:
        failure = _failure(live, exc, "listing its tools")
        if live.dead:
            await _drop(live)
        raise failure from exc
    return list(listed.tools)


async def call_tool(server: MCPTools, name: str, arguments: dict[str, Any]) -> CallToolResult:
    """Call ``name``; cancelling the caller cancels the request on the server."""
    live = await session(server)
    assert live.client is not None
    try:
        return await live.client.call_tool(name, arguments)
    except Exception as exc:
        failure = _failure(live, exc, f"the call to {name!r}")
        if live.dead:
            await _drop(live)
        raise failure from exc


def _failure(live: _Session, exc: Exception, during: str) -> Exception:
    from mcp import MCPError  # lazy: the MCP SDK loads on first use
    from mcp.types import CONNECTION_CLOSED, PARSE_ERROR  # lazy: the MCP SDK loads on first use

    if isinstance(exc, MCPError) and exc.code == PARSE_ERROR:  # one reply: the session stays
        return MCPConnectionError(f"MCP server {live.server.name!r} failed {during}: "
                                  f"{describe(exc)}")
    if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
        return exc  # the server answered with an error: the session is fine
    live.dead = True  # reopened by the next call
    return MCPConnectionError(
        f"MCP server {live.server.name!r} closed the connection during {during}: "
        f"{describe(exc)}{live.stderr_tail()}; it is restarted for the next call")


async def _drop(live: _Session) -> None:
    """Stop a session that failed (its process too), unless a new one replaced it."""
    sessions = _sessions.get(asyncio.get_running_loop(), {})
    key = live.server.key()
    if sessions.get(key) is live:
        del sessions[key]
    await live.close()


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
    from mcp import MCPError  # lazy: the MCP SDK loads on first use
    from mcp.types import PARSE_ERROR  # lazy: the MCP SDK loads on first use

    if isinstance(exc, MCPError):
        # A reply that is not JSON-RPC is told in a few words, never quoted: the URL may
        # be something other than an MCP server.
        text = "its reply is not JSON-RPC" if exc.code == PARSE_ERROR else exc.message
    return text
