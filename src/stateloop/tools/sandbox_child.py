"""The sandboxed side of a source tool: a zygote that loads the tool once and forks a fresh
child for every call.

Run as a script (``python -I sandbox_child.py``) inside the sandbox, it imports the standard
library only: no stateloop, no pydantic, so a worker is ready in tens of milliseconds. The
control socket is its stdin. The first frame carries the source and the limits; the zygote
makes itself undumpable (a call cannot read or trace it), applies the memory and process
limits, runs the source's module code and answers ``ready``. Each later frame carries the
next call's stdin, stdout, stderr and reply channel as file descriptors: the zygote forks the
child ahead of the call, and the child waits for the request on its stdin, validates the
arguments by the function's own hints, calls it and writes one JSON reply to its reply
channel. What the tool prints, from Python or to fd 1 directly, goes to its stdout and is
never read as the reply. When the child has
exited, the zygote kills whatever it left running and empties the sandbox's /tmp, so each
call starts from the same state; then it reports the exit status.

Frames are a 4-byte big-endian length and JSON.
"""

from __future__ import annotations
import __future__

import contextlib
import gc
import importlib.util
import inspect
import io
import json
import os
import resource
import shutil
import signal
import socket
import struct
import sys
import time
import traceback
from typing import Any

_HEADER = struct.Struct(">I")
_PR_SET_DUMPABLE = 4


def _sibling(name: str) -> Any:
    """A module next to this file, loaded by path: run as a script with ``-I``, this
    directory is not on ``sys.path`` (nor should it be, for the tool's own imports)."""
    spec = importlib.util.spec_from_file_location(
        f"stateloop_sandbox_{name}", os.path.join(os.path.dirname(__file__), f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_values = _sibling("sandbox_values")


# -- frames ----------------------------------------------------------------------------------


def _receive(control: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """The next frame and the descriptors sent with it; (None, []) once the server is gone."""
    header, fds, _, _ = socket.recv_fds(control, _HEADER.size, 4)
    if not header:
        return None, []
    while len(header) < _HEADER.size:
        header += _exactly(control, _HEADER.size - len(header))
    (size,) = _HEADER.unpack(header)
    return json.loads(_exactly(control, size)), fds


def _exactly(control: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = control.recv(min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _send(control: socket.socket, message: dict[str, Any]) -> None:
    body = json.dumps(message).encode()
    control.sendall(_HEADER.pack(len(body)) + body)


# -- the zygote ------------------------------------------------------------------------------


def main() -> None:
    """Zygote entry point: serve calls on the control socket until it closes."""
    control = socket.socket(fileno=os.dup(0))
    request, _ = _receive(control)
    if request is None:
        return
    # A non-dumpable process cannot be traced nor have its /proc files read by its children
    # (same uid): a call cannot reach into the zygote that later calls fork from.
    dumpable = _dumpable_switch()
    dumpable(False)
    memory = int(request["memory_mb"]) * 1024 * 1024
    processes = int(request["processes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # Counted per uid: the sandbox's own (own_uid), or per user namespace under bubblewrap.
    # The kernel exempts uid 0 outside, so for a root server without own_uid the PID
    # namespace and the timeout bound it.
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    isolated = bool(request["isolated"])
    home = os.getcwd()
    skeleton = _skeleton(home)
    tool = _load(request["source"], request["name"])
    gc.freeze()  # the loaded state is shared with every child: the collector leaves it be
    _send(control, {"ready": True})
    while True:  # each frame: the next call's stdin, stdout and stderr
        try:
            frame, fds = _receive(control)
        except (EOFError, OSError):
            return
        if frame is None:
            return
        child = os.fork()
        if child == 0:
            _child(tool, fds, int(request["cpu_seconds"]), control, dumpable)
        for fd in fds:
            os.close(fd)
        try:
            _send(control, {"pid": child})
            _, status = os.waitpid(child, 0)
            clean = _clean_up(child, isolated, home, skeleton)
            _send(control, {"status": os.waitstatus_to_exitcode(status), "clean": clean})
        except OSError:  # the server is gone
            return
        if not clean:
            return


def _dumpable_switch() -> Any:
    """``prctl(PR_SET_DUMPABLE, ...)``, found once in the zygote (ctypes costs milliseconds)."""
    import ctypes  # lazy: ctypes costs milliseconds; once, in the zygote

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda dumpable: prctl(_PR_SET_DUMPABLE, int(dumpable), 0, 0, 0)


def _load(source: str, name: str) -> Any:
    """The tool's function, or the exception its module code raised (each call reports it)."""
    namespace: dict[str, Any] = {"__name__": f"stateloop_tool_{name}"}
    try:
        # As in Letta's sandbox: typing's names are there without an import, and annotations
        # stay unevaluated, so a hint naming a class the source lacks (one of the models an
        # args_json_schema describes) does not stop the tool from loading.
        exec("from typing import *", namespace)
        code = compile(source, f"<tool {name}>", "exec",
                       flags=__future__.annotations.compiler_flag, dont_inherit=True)
        with contextlib.redirect_stdout(io.StringIO()):
            exec(code, namespace)
        function = namespace.get(name)
        if not callable(function):
            raise NameError(f"tool source defines no function named {name!r}")
        if inspect.iscoroutinefunction(function):
            import asyncio  # noqa: F401  # lazy: loaded once here, not in every call
        return function
    except BaseException as exc:  # the module's failure is every call's answer
        return exc


def _skeleton(home: str) -> set[str]:
    """What the sandbox put under ``home`` (the directories leading to binds, the binds
    themselves): kept when the rest is emptied after a call."""
    kept: set[str] = set()
    for top, dirs, files in os.walk(home):
        for entry in [*dirs, *files]:
            kept.add(os.path.join(top, entry))
        dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(top, d))]
    return kept


def _clean_up(child: int, isolated: bool, home: str, skeleton: set[str]) -> bool:
    """Kill what the call left running and empty ``home``; False when something remains."""
    if isolated:
        # Alone in the PID namespace with its init: every other process is the call's.
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        deadline = time.monotonic() + 2
        while _others():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child, signal.SIGKILL)
    try:
        _empty(home, skeleton)
    except OSError:
        return False
    return True


def _others() -> list[str]:
    own = {"1", str(os.getpid())}
    return [entry for entry in os.listdir("/proc") if entry.isdigit() and entry not in own]


def _empty(directory: str, skeleton: set[str]) -> None:
    for entry in os.scandir(directory):
        if entry.path in skeleton:
            if entry.is_dir(follow_symlinks=False) and not os.path.ismount(entry.path):
                _empty(entry.path, skeleton)
        elif entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, onerror=_writable_then_retry)
        else:
            os.unlink(entry.path)


def _writable_then_retry(function: Any, path: str, _: Any) -> None:
    os.chmod(os.path.dirname(path), 0o700)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    function(path)


# -- the child: one call ---------------------------------------------------------------------


def _child(tool: Any, fds: list[int], cpu_seconds: int, control: socket.socket,
           dumpable: Any) -> None:
    """Runs in the forked child and never returns: set up ahead of its call, it waits for
    the request on its stdin (none, at its end: the worker is closing)."""
    try:
        os.setsid()  # a process group of its own: the unisolated mode kills it whole
        *streams, reply = fds
        for target, fd in enumerate(streams):
            os.dup2(fd, target)
        control.detach()
        os.set_inheritable(reply, False)  # not a program's the tool runs
        os.closerange(3, reply)  # the control socket among them
        os.closerange(reply + 1, 1 << 16)
        # print() goes to fd 1 line by line, lone surrogates included (the server
        # reads the bytes with replacement).
        sys.stdout = open(1, "w", buffering=1, encoding="utf-8",  # noqa: SIM115
                          errors="surrogatepass", closefd=False)
        dumpable(True)  # itself: a tool may trace or inspect its own processes
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        chunks = []
        while chunk := os.read(0, 1 << 16):
            chunks.append(chunk)
        request = b"".join(chunks)
        if not request:
            return
        answer = _answer(tool, json.loads(request).get("arguments") or {})
        for stream in filter(None, (sys.stdout, sys.__stdout__, sys.stderr, sys.__stderr__)):
            with contextlib.suppress(Exception):  # the tool may have replaced or closed it
                stream.flush()
        try:
            text = json.dumps(answer)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"ok": False, "error_type": "ToolError",
                               "message": f"the tool's reply is not JSON: {exc}"})
        data = text.encode()
        while data:
            data = data[os.write(reply, data):]
    except BaseException:  # not the tool's: said on its stderr, the call's error message
        with contextlib.suppress(OSError):
            os.write(2, traceback.format_exc().encode())
    finally:
        os._exit(0)


_TRACEBACK_CHARS = 50_000  # the end of a failure's traceback, kept for its return's stderr


def _answer(tool: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    try:
        if isinstance(tool, BaseException):
            raise tool
        value = tool(**_values.validate(tool, arguments))
        if inspect.iscoroutine(value):
            import asyncio  # lazy: async tools only

            value = asyncio.run(value)
        return {"ok": True, "result": _values.format_return(value)}
    except BaseException as exc:  # the tool's failure is the call's answer
        return {"ok": False, "error_type": type(exc).__name__, "message": str(exc) or repr(exc),
                "traceback": _traceback(exc)[-_TRACEBACK_CHARS:]}


def _traceback(exc: BaseException) -> str:
    """The exception's traceback from the tool's frames on (this file's are not the tool's)."""
    frames = exc.__traceback__.tb_next if exc.__traceback__ else None
    return "".join(traceback.format_exception(type(exc), exc, frames))


if __name__ == "__main__":
    main()
