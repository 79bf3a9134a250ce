"""What each sandboxed worker holds on the host while it runs: a number no other process on
the host holds, which names its uid, and a memory cgroup of its own where the host lets the
server make one.

Numbers are leased host-wide: a lock file per number in a runtime directory, locked with
``flock`` for the worker's lifetime and unlocked once it is reaped. Servers on one host thus
never hand out the same uid (the kernel counts RLIMIT_NPROC per uid, so a shared uid would
let one server's tool starve another's), and a server that dies frees its leases with its
file descriptors.

A call's memory, all its processes together, is bounded by a cgroup: the worker's bubblewrap
joins ``stateloop-sandbox-N`` under the server's own memory cgroup (cgroup v2, or the v1
memory controller) before it starts anything, and the kernel kills a process of the call
when they hold more. Where no cgroup can be made (no write access, no delegation), the
bound is the product of the two rlimits the zygote sets: the processes of the sandbox's uid,
lowered to ``call_memory_mb // memory_mb`` (at least 4), times each one's address space
(``memory_mb``, lowered to ``call_memory_mb // 4`` where that is less).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

SANDBOX_UIDS = range(1_000_000_000, 1_000_065_536)  # no account, no file owned
_MB = 1024 * 1024
_FALLBACK_PROCESSES = 4


@dataclass(frozen=True, slots=True)
class CgroupTree:
    """Where sandboxes' memory cgroups are made: the server's own memory cgroup."""

    path: Path
    version: int  # 2, or 1 for the v1 memory controller

    def limit_files(self) -> tuple[str, str]:
        """The files bounding memory, and memory and swap together."""
        if self.version == 2:
            return "memory.max", "memory.swap.max"
        return "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"

    def describe(self) -> str:
        return f"cgroup v{self.version} under {self.path}"


@dataclass(frozen=True, slots=True)
class MemoryBound:
    """How one call's memory is bounded here, and the process limit that goes with it."""

    cgroup: CgroupTree | None
    processes: int  # RLIMIT_NPROC of the sandbox's uid
    memory_mb: int  # RLIMIT_AS of each of its processes
    megabytes: int | None  # the bound on all of a call's processes together; None: none
    how: str

    def describe(self) -> str:
        if self.megabytes is None:
            return f"a call's memory is bounded per process only: {self.how}"
        return f"a call's memory is bounded to {self.megabytes} MB ({self.how})"


def memory_bound(memory_mb: int, call_memory_mb: int, processes: int, *,
                 own_uid: bool) -> MemoryBound:
    """The bound in force for calls with these limits, their sandboxes run as uids of their
    own (``own_uid``) or in user namespaces."""
    tree = memory_cgroups()
    if isinstance(tree, CgroupTree):
        return MemoryBound(tree, processes, memory_mb, call_memory_mb,
                           f"a memory cgroup per sandbox, {tree.describe()}")
    if not own_uid and os.geteuid() == 0:  # the kernel exempts root outside from RLIMIT_NPROC
        return MemoryBound(None, processes, memory_mb, None,
                           f"{memory_mb} MB of address space; no memory cgroup ({tree}), and "
                           f"RLIMIT_NPROC does not apply to a root-mapped user namespace")
    # At least four processes (the zygote, the call, a subprocess and one more), each with
    # less address space if that is what keeps their product within the bound.
    count = min(processes, max(_FALLBACK_PROCESSES, call_memory_mb // max(memory_mb, 1)))
    each = min(memory_mb, call_memory_mb // count)
    return MemoryBound(None, count, each, count * each,
                       f"no memory cgroup ({tree}): {count} processes x {each} MB of "
                       f"address space (RLIMIT_NPROC x RLIMIT_AS)")


@functools.cache
def memory_cgroups() -> CgroupTree | str:
    """Where this process can make memory cgroups for its sandboxes, or why it cannot."""
    own = _own_cgroups()
    mounts = _cgroup_mounts()
    problems = []
    for version in (2, 1):
        if version not in own or version not in mounts:
            continue
        root, mountpoint = mounts[version]
        relative = os.path.relpath(own[version], root) if own[version] != root else "."
        tree = CgroupTree(Path(os.path.normpath(os.path.join(mountpoint, relative))), version)
        problem = _probe(tree)
        if problem is None:
            _sweep(tree)
            return tree
        problems.append(problem)
    return "; ".join(problems) or "no memory controller is mounted"


def _own_cgroups() -> dict[int, str]:
    """This process's cgroup: in the v2 hierarchy, and in v1's memory controller."""
    found: dict[int, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if not controllers:
                found[2] = path
            elif "memory" in controllers.split(","):
                found[1] = path
    return found


def _cgroup_mounts() -> dict[int, tuple[str, str]]:
    """The v2 hierarchy's and the v1 memory controller's mounts: (root, mount point)."""
    found: dict[int, tuple[str, str]] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields, _, tail = line.partition(" - ")
            parts, kind = fields.split(), tail.split()
            if len(parts) < 5 or len(kind) < 3:
                continue
            if kind[0] == "cgroup2":
                found.setdefault(2, (parts[3], parts[4]))
            elif kind[0] == "cgroup" and "memory" in kind[2].split(","):
                found.setdefault(1, (parts[3], parts[4]))
    return found


def _probe(tree: CgroupTree) -> str | None:
    """Make, bound and remove a cgroup under ``tree``; why that fails, or None."""
    if tree.version == 2:
        try:
            if "memory" not in (tree.path / "cgroup.controllers").read_text().split():
                return f"cgroup v2: no memory controller at {tree.path}"
            if "memory" not in (tree.path / "cgroup.subtree_control").read_text().split():
                (tree.path / "cgroup.subtree_control").write_text("+memory")
        except OSError as exc:
            return (f"cgroup v2: memory cannot be delegated below {tree.path} "
                    f"({exc.strerror or exc})")
    probe = tree.path / f"stateloop-probe-{os.getpid()}"
    try:
        probe.mkdir(exist_ok=True)
        try:
            (probe / tree.limit_files()[0]).write_text(str(64 * _MB))
        finally:
            probe.rmdir()
    except OSError as exc:
        return f"cgroup v{tree.version}: {tree.path} is not writable ({exc.strerror or exc})"
    return None


def _sweep(tree: CgroupTree) -> None:
    """Remove the cgroups that servers which died left under ``tree``, those whose number
    nobody holds now."""
    for left in tree.path.glob("stateloop-sandbox-*"):
        number = left.name.rpartition("-")[2]
        if not number.isdigit() or int(number) >= len(SANDBOX_UIDS):
            continue
        with contextlib.suppress(OSError):
            lease = Lease.take_number(int(number))
            lease.cgroup = left
            lease.release()


def lease_directory() -> Path:
    """Where leases are locked: one directory for every server on the host (per user)."""
    if os.geteuid() == 0:
        return Path("/run/stateloop/sandboxes")
    return Path(tempfile.gettempdir()) / f"stateloop-sandboxes-{os.geteuid()}"


def _lease_directory() -> Path:
    directory = lease_directory()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if directory.stat().st_uid != os.geteuid():
        raise PermissionError(f"{directory} belongs to another user")
    return directory


class Lease:
    """One worker's number (its uid is ``SANDBOX_UIDS[number]``) and its memory cgroup,
    held until ``release``."""

    def __init__(self, number: int, fd: int) -> None:
        self.number = number
        self.uid = SANDBOX_UIDS[number]
        self.cgroup: Path | None = None
        self.megabytes: int | None = None
        self._fd: int | None = fd

    @classmethod
    def take(cls, bound: MemoryBound | None = None) -> Lease:
        """The lowest number no process on the host holds, with a cgroup bounding memory to
        ``bound.megabytes`` when ``bound`` has cgroups; OSError when none can be had."""
        directory = _lease_directory()
        for number in range(len(SANDBOX_UIDS)):
            try:
                lease = cls.take_number(number, directory)
            except BlockingIOError:
                continue
            if bound is not None and bound.cgroup is not None and bound.megabytes is not None:
                try:
                    lease._bound(bound.cgroup, bound.megabytes)
                except OSError:
                    lease.release()
                    raise
            return lease
        raise OSError(f"all {len(SANDBOX_UIDS)} sandbox uids are in use on this host")

    @classmethod
    def take_number(cls, number: int, directory: Path | None = None) -> Lease:
        """The lease of ``number``; BlockingIOError while another process holds it."""
        fd = os.open((directory or _lease_directory()) / str(number),
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        return cls(number, fd)

    def _bound(self, tree: CgroupTree, megabytes: int) -> None:
        self.cgroup = tree.path / f"stateloop-sandbox-{self.number}"
        with contextlib.suppress(OSError):  # left by a server that died
            self.cgroup.rmdir()  # (still busy, it is this lease's anyway)
        self.cgroup.mkdir(exist_ok=True)
        memory, with_swap = tree.limit_files()
        (self.cgroup / memory).write_text(str(megabytes * _MB))
        if (self.cgroup / with_swap).exists():  # swap is memory too (v2 counts it apart)
            (self.cgroup / with_swap).write_text(
                "0" if tree.version == 2 else str(megabytes * _MB))
        self.megabytes = megabytes

    def wrap(self, command: list[str]) -> list[str]:
        """``command``, started inside the lease's cgroup (itself and all it starts)."""
        if self.cgroup is None:
            return command
        return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"',
                str(self.cgroup / "cgroup.procs"), *command]

    def oom_kills(self) -> int:
        """How many processes the kernel killed in the lease's cgroup for want of memory."""
        if self.cgroup is None:
            return 0
        for name in ("memory.events", "memory.oom_control"):
            with contextlib.suppress(OSError):
                for line in (self.cgroup / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        return 0

    def release(self) -> None:
        """Remove the cgroup (once empty) and free the number; call once all processes of
        the worker are reaped."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError):  # still busy: the next holder takes it over
                self.cgroup.rmdir()
            self.cgroup = None
        if self._fd is not None:
            os.close(self._fd)  # the lock goes with the last descriptor
            self._fd = None
