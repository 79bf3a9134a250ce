"""One sandboxed worker, seen from the server: a zygote (``sandbox_child.py``) started in its
own bubblewrap sandbox with one tool loaded, and the calls sent to it.

The server talks to the zygote over a socket pair. Ahead of each call it sends four fresh
sockets, the child's stdin, stdout, stderr and reply channel, and the zygote forks the
child, which waits on its stdin. A call then costs one hop each way: the server writes the
request, reads the reply, the printed output and the errors to their end under the output
limit and the timeout, and returns;
meanwhile the zygote waits for the child, cleans up after it, reports its exit status and
is sent the next call's sockets (the next call waits for that, when it comes first). A call
that times out, floods its output or is cancelled kills the whole worker (its sandbox's
init, and with it every process inside): the worker is then ``dead`` and the pool replaces
it.

The reply is one JSON object of a fixed shape, on a channel of its own: what the tool prints
is its stdout and nothing else. A reply of any other shape (the tool wrote it there itself)
fails the call like any other error of the tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bwrap import bwrap_command, home_env, uses_own_uid
from .confinement import Lease, memory_bound

_CHUNK = 64 * 1024
PRINTED_CHARS = 50_000  # of what a call prints, kept for its return's ``stdout``
_HEADER = struct.Struct(">I")
CHILD_SCRIPT = str(Path(__file__).with_name("sandbox_child.py"))


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What a worker runs and how: the tool's source and function, the limits, the
    isolation (``SandboxLimits`` and ``Isolation`` from ``sandbox.py``)."""

    source: str
    name: str
    limits: Any
    isolation: Any = field(compare=False)


class WorkerFailed(Exception):
    """The worker could not answer: ``error_type`` and the message become the call's error."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


class WorkerGone(WorkerFailed):
    """The worker was dead before the call reached it: the call did not run."""

    def __init__(self) -> None:
        super().__init__("ToolCrashed", "the tool's sandbox is gone")


class _OutputLimitExceeded(Exception):
    def __init__(self, stream: str, limit: int) -> None:
        super().__init__(f"the tool wrote more than {limit} bytes to {stream}; the call was "
                         f"stopped (limit: STATELOOP_TOOL_OUTPUT_BYTES)")


class Worker:
    """A started zygote; ``await Worker.start(spec)``, then ``call`` one at a time."""

    def __init__(self, spec: WorkerSpec, process: asyncio.subprocess.Process,
                 control: socket.socket, home: tempfile.TemporaryDirectory[str] | None) -> None:
        self.spec = spec
        self.process = process
        self._control = control
        self._home = home
        self._lease: Lease | None = None  # its uid and memory cgroup (under bubblewrap)
        self._buffer = b""
        self._child: int | None = None  # the call's child, as the host sees it (unisolated)
        self._command = b""  # the worker's command line, as /proc shows it
        # The waiting child's stdin, stdout, stderr and reply channel.
        self._next: tuple[socket.socket, socket.socket, socket.socket, socket.socket] | None = (
            None)
        self._settling: asyncio.Future[None] | None = None  # clean-up after the last call
        self.dead = False

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    async def start(cls, spec: WorkerSpec) -> Worker:
        """A worker with the tool loaded, or WorkerFailed (bubblewrap failed, the zygote
        died, or the source's module code did not finish within the timeout)."""
        limits, isolation = spec.limits, spec.isolation
        server_end, worker_end = socket.socketpair()
        server_end.setblocking(False)
        # The token (unused by the child) makes the command line this worker's own, so that
        # what outlives it can be found (``_kill_orphans``).
        argv = [sys.executable, "-I", CHILD_SCRIPT, secrets.token_hex(8)]
        home = lease = None
        processes, memory_mb = limits.processes, limits.memory_mb
        if isolation.bwrap is not None:
            bwrap = shutil.which(isolation.bwrap) or isolation.bwrap
            own_uid = uses_own_uid(isolation.own_uid)
            bound = memory_bound(limits.memory_mb, limits.call_memory_mb, processes,
                                 own_uid=own_uid)
            try:
                lease = Lease.take(bound)
            except OSError as exc:
                raise WorkerFailed("ToolCrashed", f"the tool's sandbox cannot be set up: "
                                                  f"{exc}") from None
            processes, memory_mb = bound.processes, bound.memory_mb
            sandboxed = bwrap_command(bwrap, argv, env=isolation.env,
                                      network=isolation.network,
                                      tmp_bytes=limits.tmp_mb * 1024 * 1024,
                                      uid=lease.uid if own_uid else None)
            command = lease.wrap(sandboxed)
            env: dict[str, str] = {}
            cwd = None
        else:  # unisolated, as explicitly allowed: still no server environment
            home = tempfile.TemporaryDirectory(prefix="stateloop-tool-")
            command = sandboxed = argv
            cwd = home.name
            env = {**home_env(cwd), **isolation.env}
        command_line = b"".join(os.fsencode(part) + b"\0" for part in sandboxed)
        spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
            *command, stdin=worker_end.fileno(), stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, env=env, cwd=cwd))
        try:
            process = await asyncio.shield(spawn)
        except BaseException:
            # Cancelled while bubblewrap starts: let it start, then stop all of it (killed
            # half-started, it can leave the sandbox's init behind, waiting forever).
            try:
                started: asyncio.subprocess.Process | None = await spawn
            except Exception:
                started = None  # it could not start
            if started is None:
                server_end.close()
                if home is not None:
                    home.cleanup()
                if lease is not None:
                    lease.release()
            else:
                stray = cls(spec, started, server_end, home)
                stray._command, stray._lease = command_line, lease
                stray.kill()
                await stray.close()
            raise
        finally:
            worker_end.close()
        worker = cls(spec, process, server_end, home)
        worker._command, worker._lease = command_line, lease
        try:
            await worker._send({"source": spec.source, "name": spec.name,
                                "memory_mb": memory_mb,
                                "cpu_seconds": int(limits.timeout) + 1,
                                "processes": processes,
                                "isolated": isolation.bwrap is not None})
            await asyncio.wait_for(worker._receive(), limits.timeout)
            await asyncio.wait_for(worker._prepare(), limits.timeout)
        except TimeoutError:
            worker.kill()
            await worker.close()
            raise WorkerFailed("TimeoutError", f"the tool's module code did not finish within "
                                               f"{limits.timeout:g} s") from None
        except (OSError, EOFError):
            said = await worker._stderr_tail()
            worker.kill()
            await worker.close()
            raise WorkerFailed("ToolCrashed", "the tool's sandbox did not start"
                               + (f": {said}" if said else "")) from None
        except BaseException:
            worker.kill()
            await worker.close()
            raise
        return worker

    async def call(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The child's reply, or an error reply; kills the worker on a timeout, an output
        flood or a cancellation. WorkerGone: the worker died before the call reached it."""
        await self.ready()
        assert self._next is not None
        streams, self._next = self._next, None
        try:
            return await self._exchange(*streams, json.dumps({"arguments": arguments}).encode())
        finally:
            for stream in streams:
                stream.close()

    async def ready(self) -> None:
        """Wait until the previous call is cleaned up after and the next child waits."""
        if self._settling is not None:
            await self._settling
        if self.dead or self._next is None or self.process.returncode is not None:
            self.kill()
            raise WorkerGone

    async def _exchange(self, stdin: socket.socket, out: socket.socket, err: socket.socket,
                        answer: socket.socket, request: bytes) -> dict[str, Any]:
        limits = self.spec.limits
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.timeout
        tasks = (asyncio.ensure_future(self._feed(stdin, request)),
                 asyncio.ensure_future(self._read_bounded(out, "stdout", limits.output_bytes)),
                 asyncio.ensure_future(self._read_bounded(err, "stderr", limits.output_bytes)),
                 asyncio.ensure_future(self._read_bounded(answer, "its reply",
                                                          limits.output_bytes)))
        failure: tuple[str, str] | None = None
        status: tuple[int, bool] | None = None
        killed_before = self._lease.oom_kills() if self._lease else 0
        try:
            _, stdout, stderr, replied = await asyncio.wait_for(asyncio.gather(*tasks),
                                                                limits.timeout)
            reply = _parse(replied)
            if not replied:  # no reply: how the child ended says why
                status = await asyncio.wait_for(self._exit(), max(deadline - loop.time(), 1))
        except TimeoutError:
            failure = ("TimeoutError", f"the tool did not finish within {limits.timeout:g} s "
                                       f"and was stopped")
        except _OutputLimitExceeded as exc:
            failure = ("OutputLimitExceeded", str(exc))
        except (OSError, EOFError):  # the worker died during the call
            self.kill()
            return (self._out_of_memory(killed_before)
                    or _crashed((await self._stderr_tail()).encode(), None))
        except BaseException:  # cancelled (the run was) or gone: nothing of the call outlives it
            self.kill()
            raise
        finally:
            for task in tasks:
                task.cancel()
        if failure is not None:
            self.kill()
            return {"ok": False, "error_type": failure[0], "message": failure[1]}
        self._settling = asyncio.ensure_future(self._settle(status))
        out_of_memory = self._out_of_memory(killed_before)  # whatever the tool answered
        if out_of_memory is not None:
            reply = out_of_memory
        elif reply is None:
            reply = (_crashed(stderr, status and status[0]) if not replied else
                     {"ok": False, "error_type": "ToolError",
                      "message": "the tool wrote a malformed reply to the reply channel"})
        if stdout:
            reply["stdout"] = stdout.decode(errors="replace")[:PRINTED_CHARS]
        return reply

    def _out_of_memory(self, killed_before: int) -> dict[str, Any] | None:
        """The call's error when the kernel killed some of it for exceeding its memory."""
        if self._lease is None or self._lease.oom_kills() <= killed_before:
            return None
        return {"ok": False, "error_type": "MemoryLimitExceeded",
                "message": f"the tool's processes together reached the call's memory bound "
                           f"({self._lease.megabytes} MB) and were stopped (limit: "
                           f"STATELOOP_TOOL_CALL_MEMORY_MB)"}

    async def _feed(self, stdin: socket.socket, request: bytes) -> None:
        try:
            await asyncio.get_running_loop().sock_sendall(stdin, request)
        except (BrokenPipeError, ConnectionResetError):
            raise WorkerGone from None  # the waiting child was dead: the call never ran
        stdin.close()  # the end of the request

    async def _prepare(self) -> None:
        """Have the zygote fork the next call's child, to wait for its request."""
        pairs = [socket.socketpair() for _ in range(4)]  # stdin, stdout, stderr, reply
        self._next = (pairs[0][0], pairs[1][0], pairs[2][0], pairs[3][0])
        for ours in self._next:
            ours.setblocking(False)
        try:
            await self._send({}, [theirs.fileno() for _, theirs in pairs])
        finally:
            for _, theirs in pairs:
                theirs.close()
        self._child = int((await self._receive())["pid"])

    async def _settle(self, status: tuple[int, bool] | None) -> None:
        """After a call: the zygote's clean-up, then the next child; or the worker goes."""
        try:
            if status is None:
                status = await asyncio.wait_for(self._exit(), 5)
            if not status[1]:
                self.kill()  # something of the call could not be removed
                return
            await asyncio.wait_for(self._prepare(), 5)
        except (OSError, EOFError, TimeoutError):
            self.kill()

    async def _exit(self) -> tuple[int, bool]:
        """The call's exit status, and whether all it left was removed."""
        done = await self._receive()
        self._child = None
        return int(done["status"]), bool(done["clean"])

    async def _read_bounded(self, sock: socket.socket, name: str, limit: int) -> bytes:
        loop = asyncio.get_running_loop()
        chunks: list[bytes] = []
        size = 0
        while chunk := await loop.sock_recv(sock, _CHUNK):
            size += len(chunk)
            if size > limit:
                raise _OutputLimitExceeded(name, limit)
            chunks.append(chunk)
        return b"".join(chunks)

    async def _send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        body = json.dumps(message).encode()
        header = _HEADER.pack(len(body))
        if fds:  # with the first bytes; the zygote is waiting for a frame, its buffer empty
            sent = socket.send_fds(self._control, [header], fds)
            header = header[sent:]
        await asyncio.get_running_loop().sock_sendall(self._control, header + body)

    async def _receive(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        while True:
            if len(self._buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self._buffer)
                if len(self._buffer) >= _HEADER.size + size:
                    body = self._buffer[_HEADER.size:_HEADER.size + size]
                    self._buffer = self._buffer[_HEADER.size + size:]
                    message: dict[str, Any] = json.loads(body)
                    return message
            chunk = await loop.sock_recv(self._control, _CHUNK)
            if not chunk:
                raise EOFError("the worker is gone")
            self._buffer += chunk

    async def _stderr_tail(self) -> str:
        """The last lines the zygote or bubblewrap wrote (once it has exited)."""
        assert self.process.stderr is not None
        with contextlib.suppress(TimeoutError):
            said = await asyncio.wait_for(self.process.stderr.read(_CHUNK), 2)
            return " | ".join(said.decode(errors="replace").strip().splitlines()[-3:])
        return ""

    def kill(self) -> None:
        """Kill the worker now, and everything of its calls; ``close`` reaps it.

        Under bubblewrap the sandbox's init goes: the kernel takes every process of its PID
        namespace with it and bubblewrap, its parent, reaps it and exits (killing both at
        once would leave the init a zombie of the host's init). Unisolated, the running
        call's process group goes, and the zygote, left without a server, exits."""
        self.dead = True
        if self.process.returncode is not None:
            return
        targets: list[int] = []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.spec.isolation.bwrap is not None:
                for pid in (targets := _children(self.process.pid)):
                    os.kill(pid, signal.SIGKILL)
            elif self._child is not None:
                targets = [self._child]
                os.killpg(self._child, signal.SIGKILL)
        if not targets:  # still starting, or the zygote itself is stuck
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self._control.close()

    async def close(self) -> None:
        """Stop and reap the worker (unless killed, its zygote exits at the end of its
        stream), and free what it held."""
        self.dead = True
        if self._settling is not None:
            self._settling.cancel()
        for stream in self._next or ():
            stream.close()  # the waiting child reads the end of its request, and exits
        self._control.close()
        for last_resort in (False, True):
            try:
                await asyncio.wait_for(self.process.wait(), 5)
                break
            except TimeoutError:
                if last_resort:
                    break
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
        if self.spec.isolation.bwrap is not None:
            _kill_orphans(self._command)
        if self._lease is not None:  # nothing of the worker is left: its uid is free
            self._lease.release()
            self._lease = None
        if self._home is not None:
            self._home.cleanup()
            self._home = None


def _kill_orphans(command: bytes) -> None:
    """Kill what is left of a worker once bubblewrap is reaped: a sandbox's init whose
    parent-death signal never came (bubblewrap killed while it was still setting the init
    up) would otherwise wait forever, ignoring every signal from outside but SIGKILL."""
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or (entry / "cmdline").read_bytes() != command:
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if state != "Z":
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


def _parse(data: bytes) -> dict[str, Any] | None:
    """The child's reply, or None unless it is exactly ``{"ok": true, "result": str}`` or
    ``{"ok": false, "error_type": str, "message": str, "traceback": str}`` (the traceback
    optional)."""
    try:
        reply = json.loads(data)
    except ValueError:
        return None
    if not isinstance(reply, dict):
        return None
    if reply.get("ok") is True:
        shape = {"ok": bool, "result": str}
    elif reply.get("ok") is False:
        shape = {"ok": bool, "error_type": str, "message": str, "traceback": str}
        if "traceback" not in reply:
            del shape["traceback"]
    else:
        return None
    if set(reply) != set(shape) or not all(isinstance(reply[key], kind)
                                           for key, kind in shape.items()):
        return None
    return reply


def _crashed(err: bytes, code: int | None) -> dict[str, Any]:
    tail = err.decode(errors="replace").strip().splitlines()[-3:]
    how = ("was lost with its sandbox" if code is None else
           f"was killed by signal {-code}" if code < 0 else f"exited with code {code}")
    return {"ok": False, "error_type": "ToolCrashed",
            "message": f"the tool process {how}" + (f": {' | '.join(tail)}" if tail else "")}
