"""A stdio MCP server's process and its messages, each message bounded in size.

The SDK's stdio transport reads a line of any length, and hands a line it cannot parse to
the session, where the request waiting for its answer then waits forever. Here a message
over ``max_bytes``, or one that is not JSON-RPC, ends the connection (the reason goes to
``problems``), so the calls in flight fail at once; closing stops the process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Mapping
from typing import Any, TextIO

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

EXIT_GRACE = 2.0  # seconds a server may take to exit once its stdin is closed
KILL_WAIT = 2.0  # seconds to see a killed process gone


@contextlib.asynccontextmanager
async def stdio_streams(argv: list[str], *, env: Mapping[str, str], cwd: str | None,
                        errlog: TextIO | None, max_bytes: int | None, problems: list[str]
                        ) -> AsyncIterator[tuple[MemoryObjectReceiveStream[Any],
                                                 MemoryObjectSendStream[SessionMessage]]]:
    """Run ``argv`` and yield the session's ``(read, write)`` streams to it."""
    process = await anyio.open_process(argv, env=dict(env), cwd=cwd, stderr=errlog,
                                       start_new_session=True)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        async with read_writer:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError,
                                     anyio.EndOfStream, OSError):
                async for chunk in process.stdout:
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[:end + 1]
                        if not _fits(line, max_bytes, problems):
                            return
                        message = _parse(line, problems)
                        if message is None:
                            return
                        await read_writer.send(message)
                    if not _fits(buffer, max_bytes, problems):
                        return

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the connection end

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                for stream in (read_stream, write_stream):
                    stream.close()
                await _stop(process)
            tasks.cancel_scope.cancel()


def _fits(data: bytes | bytearray, max_bytes: int | None, problems: list[str]) -> bool:
    if max_bytes is None or len(data) <= max_bytes:
        return True
    problems.append(f"it sent a message over {max_bytes} bytes")
    return False


def _parse(line: bytes, problems: list[str]) -> SessionMessage | None:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValidationError as exc:  # its words, never the line itself
        problems.append(f"it sent a message that is not JSON-RPC ({exc.errors()[0]['msg']})")
        return None


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin; after the grace, kill the process group (a sandbox takes its tree
    with it)."""
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdin is not None:
            await process.stdin.aclose()
    with anyio.move_on_after(EXIT_GRACE):
        await process.wait()
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with anyio.move_on_after(KILL_WAIT):
            await process.wait()
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdout is not None:
            await process.stdout.aclose()
    # anyio leaves asyncio's subprocess transport open (it warns when collected after its
    # loop closed); nothing public reaches it.
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(PermissionError):
            close()
