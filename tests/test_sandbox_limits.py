"""Limits that span sandboxes, in real bubblewrap: the uid each sandbox runs as is leased
host-wide, so servers on one host never share one (and with it a process limit), and a
call's processes together hold no more memory than the call's bound."""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from patience import STARTS, STOPS
from sandbox_support import new_marker, processes_with
from stateloop.tools import confinement
from stateloop.tools.bwrap import bwrap_problem, uses_own_uid
from stateloop.tools.confinement import SANDBOX_UIDS, Lease, lease_directory, memory_bound
from stateloop.tools.pool import WorkerPool
from stateloop.tools.sandbox import Isolation, SandboxedToolError, SandboxLimits, run_source
from stateloop.tools.worker import WorkerSpec

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap is unusable")

MB = 1024 * 1024


def _uid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except OSError:
        pass  # gone meanwhile
    return None


def _pss(pid: int) -> int:
    """Bytes of anonymous memory ``pid`` holds (shared pages divided among sharers)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss_Anon:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass  # gone meanwhile
    return 0


# -- uids ------------------------------------------------------------------------------------

# Holds as many processes as its uid may have, and keeps them.
HOLD = '''
def hold() -> str:
    import os, time
    for _ in range(200):
        try:
            if os.fork() == 0:
                os.execv("/bin/sleep", ["sleep", "{marker}"])
        except OSError:
            break
    time.sleep(120)
'''

# Starts four processes and says which uid it ran as.
FORK = '''
def spawn() -> str:
    import os, subprocess
    codes = [subprocess.run(["/bin/true"], check=False).returncode for _ in range(4)]
    return f"{os.getuid()} {codes}"
'''

HOLDING_SERVER = '''
import asyncio, sys
from stateloop.tools.pool import WorkerPool
from stateloop.tools.sandbox import Isolation, SandboxLimits
from stateloop.tools.worker import WorkerSpec

async def main() -> None:
    pool = WorkerPool()
    spec = WorkerSpec(sys.argv[1], "hold", SandboxLimits(timeout=120, processes=16), Isolation())
    slots = [pool.slot(spec) for _ in range(3)]
    await asyncio.gather(*(pool.call(slot, {}) for slot in slots))

asyncio.run(main())
'''


@pytest.mark.skipif(not uses_own_uid(None), reason="sandboxes get uids of their own as root")
def test_two_processes_never_share_a_uid_nor_a_process_limit(leftovers: list[str],
                                                            tmp_path: Path) -> None:
    """Process A's three tools hold all the processes their uids may have; process B's
    tools, started meanwhile, run as other uids and start their processes."""
    marker = new_marker()
    leftovers.append(marker)
    script = tmp_path / "holder.py"
    script.write_text(HOLDING_SERVER)
    holder = subprocess.Popen([sys.executable, str(script), HOLD.format(marker=marker)],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.time() + 60
        while len(held := {_uid(p) for p in processes_with(marker)} - {None, 0}) < 3 or len(
                processes_with(marker)) < 3 * 12:
            assert time.time() < deadline and holder.poll() is None, "A never held its uids"
            time.sleep(0.1)
        assert held <= set(SANDBOX_UIDS)

        async def three_calls() -> list[dict[str, Any]]:
            pool = WorkerPool()
            spec = WorkerSpec(FORK, "spawn", SandboxLimits(timeout=20, processes=16),
                              Isolation())
            try:
                return list(await asyncio.gather(*(pool.call(pool.slot(spec), {})
                                                   for _ in range(3))))
            finally:
                await pool.close()

        replies = [reply.get("result") or str(reply) for reply in asyncio.run(three_calls())]
    finally:
        holder.kill()  # it dies holding its leases: they free themselves
        holder.wait()
    theirs = {int(reply.split()[0]) for reply in replies}
    assert all(reply.endswith("[0, 0, 0, 0]") for reply in replies), replies
    assert len(theirs) == 3 and theirs <= set(SANDBOX_UIDS) and not theirs & held, (
        theirs, held)


def test_a_lease_is_the_holders_until_it_releases_or_dies(tmp_path: Path) -> None:
    script = tmp_path / "leaser.py"
    script.write_text("import sys, time\nfrom stateloop.tools.confinement import Lease\n"
                      "leases = [Lease.take() for _ in range(3)]\n"
                      "print(' '.join(str(lease.number) for lease in leases), flush=True)\n"
                      "time.sleep(120)\n")
    leaser = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert leaser.stdout is not None
        theirs = {int(number) for number in leaser.stdout.readline().split()}
        ours = [Lease.take() for _ in range(3)]
        assert len(theirs) == 3 and not theirs & {lease.number for lease in ours}
        for lease in ours:
            lease.release()
    finally:
        leaser.kill()  # no chance to release: its descriptors go, and the locks with them
        leaser.wait()
    for number in theirs:
        with open(lease_directory() / str(number), "rb") as file:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while still held


# -- memory ----------------------------------------------------------------------------------

# Starts ``count`` processes that each write ``mb`` megabytes and keep them, then waits
# until each has said it holds them, or died.
CHILDREN = '''
def children(count: int, mb: int) -> str:
    import subprocess, sys
    code = ("# {marker}\\nimport time\\nheld = b'x' * ({{mb}} << 20)\\n"
            "print('held', flush=True)\\ntime.sleep(60)")
    started = [subprocess.Popen([sys.executable, "-c", code.format(mb=mb)],
                                stdout=subprocess.PIPE) for _ in range(count)]
    said = [child.stdout.readline().decode().strip() or "died" for child in started]
    for child in started:
        child.kill()
    return " ".join(said)
'''


class _Peak:
    """The most anonymous memory (PSS) the processes with ``marker`` held together at any
    sample; with ``tree``, also the kernel's own high-water mark and limit of the memory
    cgroups under it those processes ran in (exact, where sampling may miss or overlap)."""

    def __init__(self, marker: str, tree: confinement.CgroupTree | None = None) -> None:
        self.marker = marker
        self.tree = tree
        self.bytes = 0
        self.cgroups: dict[Path, tuple[int, int]] = {}  # cgroup: (peak, limit) in bytes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> _Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            pids = processes_with(self.marker)
            held = sum(_pss(process) for process in pids)
            self.bytes = max(self.bytes, held)
            if self.tree is not None:
                for pid in pids:
                    self._read_cgroup(pid)
            self._stop.wait(0.02)

    def _read_cgroup(self, pid: int) -> None:
        assert self.tree is not None
        version = self.tree.version
        peak_file = "memory.peak" if version == 2 else "memory.max_usage_in_bytes"
        limit_file = self.tree.limit_files()[0]
        try:
            mine, theirs = _memory_cgroup("self", version), _memory_cgroup(str(pid), version)
            if theirs is None or mine is None or not theirs.startswith(mine.rstrip("/") + "/"):
                return  # not (or no longer) in a sandbox's cgroup under this server's
            where = self.tree.path / os.path.relpath(theirs, mine)
            peak = int((where / peak_file).read_text())
            limit = (where / limit_file).read_text().strip()
        except (OSError, ValueError):
            return  # gone meanwhile
        seen = self.cgroups.get(where, (0, 0))[0]
        self.cgroups[where] = (max(seen, peak), -1 if limit == "max" else int(limit))


def _memory_cgroup(pid: str, version: int) -> str | None:
    """The process's memory cgroup, as /proc names it (v2's hierarchy or v1's controller)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (version == 2 and not controllers) or (
                version == 1 and "memory" in controllers.split(",")):
            return path
    return None


@pytest.mark.skipif(not isinstance(confinement.memory_cgroups(), confinement.CgroupTree),
                    reason="no memory cgroup can be made here")
def test_a_calls_processes_together_stay_within_its_bound(leftovers: list[str]) -> None:
    """Six children of 150 MB each (900 MB) against a 256 MB bound: the kernel stops them at
    the bound, the call fails saying so, and the worker serves the next call."""
    marker = new_marker()
    leftovers.append(marker)
    limits = SandboxLimits(timeout=30, memory_mb=256, processes=16, call_memory_mb=256)
    assert memory_bound(256, 256, 16, own_uid=uses_own_uid(None)).megabytes == 256

    async def calls() -> tuple[dict[str, Any], dict[str, Any], list[int], list[int]]:
        pool = WorkerPool()
        slot = pool.slot(WorkerSpec(CHILDREN.format(marker=marker), "children", limits,
                                    Isolation()))
        try:
            failed = await pool.call(slot, {"count": 6, "mb": 150})
            first = pool.pids()
            after = await pool.call(slot, {"count": 1, "mb": 50})
            return failed, after, first, pool.pids()
        finally:
            await pool.close()

    tree = confinement.memory_cgroups()
    assert isinstance(tree, confinement.CgroupTree)
    server_rss = _rss()
    with _Peak(marker, tree) as peak:
        failed, after, workers, workers_after = asyncio.run(calls())
    assert failed["error_type"] == "MemoryLimitExceeded", failed
    assert "256 MB" in failed["message"] and "STATELOOP_TOOL_CALL_MEMORY_MB" in failed["message"]
    # The same worker serves the next call: only the call was stopped.
    assert after == {"ok": True, "result": "held"}, after
    assert len(workers) == 1 and workers_after == workers
    # The children ran in a cgroup of the call's, limited to 256 MB, whose high-water mark
    # the kernel kept at the bound: far under the 900 MB they would hold unbounded. (Sampled
    # process by process, their PSS can add a child read just before it was killed to its
    # successor's, so the kernel's own figure is the one asserted.)
    assert peak.cgroups, "the children were never seen in a sandbox's memory cgroup"
    assert {limit for _, limit in peak.cgroups.values()} == {256 * MB}, peak.cgroups
    assert max(top for top, _ in peak.cgroups.values()) <= 256 * MB, peak.cgroups
    assert peak.bytes > 0  # the children were seen holding memory
    assert _rss() - server_rss < 64 * MB


def test_without_a_cgroup_the_process_limit_bounds_a_call(leftovers: list[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback where no cgroup can be made: 512 MB for the call, 128 MB of address
    space per process, so four processes in all (the zygote, the call and two more)."""
    monkeypatch.setattr(confinement, "memory_cgroups", lambda: "cgroups refused for the test")
    bound = memory_bound(128, 512, 64, own_uid=uses_own_uid(None))
    if bound.megabytes is None:
        pytest.skip(bound.describe())  # a root-mapped user namespace: no process limit
    assert bound.processes == 4 and bound.megabytes == 512
    assert "4 processes x 128 MB" in bound.describe()
    default = memory_bound(512, 1024, 64, own_uid=uses_own_uid(None))
    assert (default.processes, default.memory_mb, default.megabytes) == (4, 256, 1024)
    marker = new_marker()
    leftovers.append(marker)
    limits = SandboxLimits(timeout=30, memory_mb=128, processes=64, call_memory_mb=512)
    with _Peak(marker) as peak:
        with pytest.raises(SandboxedToolError) as failed:
            asyncio.run(run_source(CHILDREN.format(marker=marker), "children",
                                   {"count": 6, "mb": 100}, limits))
        big = asyncio.run(run_source(CHILDREN.format(marker=marker), "children",
                                     {"count": 1, "mb": 200}, limits))
    assert type(failed.value).__name__ == "BlockingIOError", failed.value  # the third child
    assert big == "died"  # 200 MB is more than a process's 128 MB: MemoryError
    assert peak.bytes <= 512 * MB, peak.bytes / MB


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


# -- what the server says --------------------------------------------------------------------


def test_the_start_log_names_the_memory_bound(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
           "STATELOOP_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "STATELOOP_TOOL_CALL_MEMORY_MB": "300", "STATELOOP_TOOL_MEMORY_MB": "100"}
    server = subprocess.Popen([sys.executable, "-m", "stateloop", "serve", "--port", str(port)],
                              env=env, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    assert server.stderr is not None
    reader = threading.Thread(target=lambda: said.extend(server.stderr or ()), daemon=True)
    reader.start()
    try:
        deadline = time.time() + STARTS
        while not any("Application startup complete" in line for line in said):
            assert time.time() < deadline and server.poll() is None, said
            time.sleep(0.1)
        bound = memory_bound(100, 300, 64, own_uid=uses_own_uid(None))
        named = [line for line in said if "a call's memory is bounded" in line]
        assert named and bound.describe() in named[0], said
        if isinstance(confinement.memory_cgroups(), confinement.CgroupTree):
            assert "bounded to 300 MB (a memory cgroup per sandbox" in named[0]
    finally:
        server.terminate()
        server.wait(timeout=STOPS)
