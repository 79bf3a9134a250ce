"""The bubblewrap command line that isolates one worker of a source tool (its calls).

The worker sees an empty file system but for read-only binds of what its interpreter needs
(the Python installation, the virtualenv, the stateloop package and the system libraries),
a fresh ``/proc`` and ``/dev``, and a size-limited tmpfs of its own as ``/tmp``: the only
writable place, also its ``HOME``, emptied after each call and gone with the worker. It has
new user, PID, IPC, UTS, cgroup and network namespaces (so no host process to signal and
only its own loopback), no environment but what is passed, and it dies with the server:
``--die-with-parent`` on the sandbox's init, whose exit takes the whole PID namespace with it.
A root server runs each worker as a uid of its own, leased host-wide (``confinement.py``).
"""

from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .confinement import Lease

NOBODY = 65534
SANDBOX_TMP = "/tmp"
# What name resolution and TLS read, for the tools allowed on the network.
_NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl",
                  "/etc/ca-certificates", "/etc/pki")


def package_root() -> str:
    """The directory the running stateloop package was imported from (src, a build,
    site-packages): the child imports the very same code."""
    return str(Path(__file__).resolve().parents[2])  # src/stateloop/tools/bwrap.py -> src


@functools.cache
def _interpreter_paths() -> list[str]:
    """Directories the child interpreter reads: its installation, the virtualenv, the
    site-packages, the stateloop package and the system's libraries."""
    paths = [sys.base_prefix, sys.prefix, *site.getsitepackages(), package_root(),
             str(Path(sys.executable).resolve().parent.parent)]
    paths += [path for path in ("/usr", "/etc/ld.so.cache", "/etc/localtime")
              if os.path.exists(path)]
    forms = {form for path in paths for form in (os.path.abspath(path), os.path.realpath(path))
             if os.path.exists(form)}
    found: list[str] = []
    for path in sorted(forms, key=lambda p: (p.count("/"), p)):  # parents first
        if not any(path.startswith(parent + "/") for parent in found):
            found.append(path)
    return found


def _ancestors(paths: list[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        parent = os.path.dirname(path)
        chain = []
        while parent not in ("/", "") and parent not in found:
            chain.append(parent)
            parent = os.path.dirname(parent)
        found += reversed(chain)
    return found


@functools.cache
def _root_links() -> list[str]:
    """``/lib``, ``/bin``...: symlinks into /usr on merged-/usr systems, binds elsewhere."""
    args: list[str] = []
    for path in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def home_env(home: str) -> dict[str, str]:
    """The variables a sandboxed (or explicitly unisolated) process starts with: ``home``
    as its home and temporary directory, and the system's programs on its path."""
    return {"HOME": home, "TMPDIR": home, "PATH": "/usr/local/bin:/usr/bin:/bin"}


def uses_own_uid(own_uid: bool | None) -> bool:
    """Whether workers get uids of their own: ``own_uid``, by default when running as root."""
    return os.geteuid() == 0 if own_uid is None else own_uid


def bwrap_command(bwrap: str, argv: list[str], *, env: Mapping[str, str],
                  network: bool = False, tmp_bytes: int = 64 * 1024 * 1024,
                  uid: int | None = None, binds: Sequence[str] = ()) -> list[str]:
    """``bwrap ... -- argv``: run ``argv`` isolated, with a ``tmp_bytes`` tmpfs as /tmp;
    as ``uid`` (a leased one, see ``confinement.py``), or as nobody in a user namespace;
    ``binds`` are more paths it may read (as the operator allowed them)."""
    command = [bwrap, *_identity(uid is not None), "--unshare-ipc", "--unshare-pid",
               "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox",
               "--die-with-parent", "--new-session", "--clearenv", "--proc", "/proc",
               "--dev", "/dev"]
    if not network:
        command.append("--unshare-net")
    command += _root_links()
    mounts = [*_interpreter_paths()] + ([path for path in _NETWORK_FILES if os.path.exists(path)]
                                     if network else [])
    mounts += binds
    # The tmpfs first: a virtualenv or checkout under /tmp is bound on top of it, not hidden.
    command += ["--perms", "01777", "--size", str(tmp_bytes), "--tmpfs", SANDBOX_TMP]
    for parent in _ancestors(mounts):  # traversable by the child's uid, whatever it is
        if parent != SANDBOX_TMP:
            command += ["--perms", "0755", "--dir", parent]
    for path in mounts:
        command += ["--ro-bind", path, path]
    command += ["--chdir", SANDBOX_TMP]
    base = {**home_env(SANDBOX_TMP), "LANG": "C.UTF-8"}
    for name, value in {**base, **env}.items():
        command += ["--setenv", name, value]
    return [*command, "--", *_drop_root(uid), *argv]


def _identity(own_uid: bool) -> list[str]:
    """Who the child is. A server running as an ordinary user gets a user namespace: the
    child is nobody inside, the server's uid outside, and RLIMIT_NPROC counts the call's
    processes alone. A root server would map the child to root outside, which the kernel
    exempts from RLIMIT_NPROC: there bubblewrap sets up as root and ``setpriv`` drops the
    child to a uid of its own, with no capabilities (``_drop_root``)."""
    if own_uid:
        return []
    return ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]


def _drop_root(uid: int | None) -> list[str]:
    if uid is None:
        return []
    # A uid per worker, leased host-wide: its process limit is its own.
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [setpriv, "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def bwrap_mode(bwrap: str = "bwrap") -> tuple[bool, str | None]:
    """``(own_uid, problem)``: how bubblewrap works here, and why it cannot (None: it can).
    A root without the capability to set up namespaces (a container) falls back to a user
    namespace, as an ordinary user would."""
    own_uid = uses_own_uid(None)
    problem = bwrap_problem(bwrap, own_uid=own_uid)
    if problem and own_uid and bwrap_problem(bwrap, own_uid=False) is None:
        return False, None
    return own_uid, problem


def bwrap_problem(bwrap: str = "bwrap", *, own_uid: bool | None = None) -> str | None:
    """Why bubblewrap cannot isolate tools here (missing, no user namespaces...), or None
    when a sandboxed interpreter starts and runs."""
    try:
        lease = Lease.take() if uses_own_uid(own_uid) else None
    except OSError as exc:
        return f"no sandbox uid can be leased: {exc}"
    command = bwrap_command(bwrap, [sys.executable, "-I", "-c", "pass"], env={},
                            uid=lease.uid if lease else None)
    try:
        done = subprocess.run(command, capture_output=True, timeout=30, check=False)
    except FileNotFoundError:
        return f"{bwrap!r} is not installed (Debian: apt-get install bubblewrap)"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{bwrap!r} cannot start: {exc}"
    finally:
        if lease is not None:
            lease.release()
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"{bwrap!r} failed (exit {done.returncode}): {said[-1] if said else 'no output'}"
    return None
