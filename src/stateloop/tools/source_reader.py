"""Tool source from clients, read without parsing it in the server's process.

A source over ``max_bytes`` is refused outright (``SourceTooLarge``). Any other is parsed and
compiled by a child process of its own (``source_child.py``) under a memory and a CPU limit
and a wall-clock timeout, a few at a time, while the event loop serves other requests; what
comes back is the tool function's signature and docstring, small and shallow, which
``source_schema`` reads as it would the whole source. A source the parser chokes on (too
deep, too big, too slow) is a ``ToolDefinitionError`` like any other that does not compile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path

from ..errors import ToolDefinitionError

CHILD_SCRIPT = str(Path(__file__).with_name("source_child.py"))


class SourceTooLarge(ToolDefinitionError):
    """The source is longer than the server reads."""


class SourceReader:
    """Reads sources under one set of limits: ``max_bytes`` of UTF-8 per source, and for
    the child that parses it ``memory_mb`` of address space and ``timeout`` seconds; at
    most ``concurrency`` children at once (more requests wait their turn)."""

    def __init__(self, *, max_bytes: int = 1_000_000, memory_mb: int = 512,
                 timeout: float = 30.0, concurrency: int = 2) -> None:
        self.max_bytes = max_bytes
        self.memory_mb = memory_mb
        self.timeout = timeout
        self._turns = asyncio.Semaphore(concurrency)

    def check_size(self, source: str) -> None:
        """SourceTooLarge when ``source`` is over the limit."""
        size = len(source.encode(errors="surrogatepass"))
        if size > self.max_bytes:
            raise SourceTooLarge(f"source_code is {size} bytes, more than the {self.max_bytes} "
                                 f"this server reads (STATELOOP_TOOL_SOURCE_BYTES)")

    async def signature(self, source: str, name: str | None = None) -> str:
        """The stub of the tool function ``name`` (default: the last one defined): its
        ``def`` line and docstring; ToolDefinitionError when the source cannot be one."""
        self.check_size(source)
        request = json.dumps({"source": source, "name": name, "memory_mb": self.memory_mb,
                              "cpu_seconds": max(int(self.timeout), 1)},
                             ensure_ascii=False).encode(errors="surrogatepass")
        async with self._turns:
            answer = await self._run(request)
        if answer is None:
            raise ToolDefinitionError(
                f"source_code could not be parsed within {self.memory_mb} MB and "
                f"{self.timeout:g} s (too large or too deeply nested)")
        if "error" in answer:
            raise ToolDefinitionError(str(answer["error"]))
        return str(answer["signature"])

    async def _run(self, request: bytes) -> dict[str, str] | None:
        """The child's answer, or None when it failed (killed by a limit, or timed out)."""
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-I", CHILD_SCRIPT, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env={})
        try:
            out, _ = await asyncio.wait_for(child.communicate(request), self.timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()
            return None
        except BaseException:  # the request was cancelled: the child goes too
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            raise
        if child.returncode != 0:
            return None
        try:
            answer = json.loads(out)
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None
