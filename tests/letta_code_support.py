"""Letta Code (``@letta-ai/letta-code``, Letta's CLI) installed for the tests that drive it
against ``stateloop serve``: one pinned version, installed once per machine into the cache
directory and reused, with the npm overrides the public registry needs for it.

Two of its dependencies, ``@letta-ai/letta-agent-sdk`` and ``@letta-ai/trajectory``, are
bundled inside ``letta.js`` and are mapped to empty local packages; the sharp-electron build
it pins is not published, the next one is. Install scripts are not run (nothing the tests
use needs them), so no native build and no download besides the registry's.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

VERSION = "0.32.18"
OVERRIDES = {
    "@janhapke/sharp-electron": "0.35.4-electron.1",
    "@letta-ai/letta-agent-sdk": "file:./stub/letta-agent-sdk",
    "@letta-ai/trajectory": "file:./stub/trajectory",
}
INSTALL_TIMEOUT = 600  # seconds one `npm install` may take on a loaded machine


class NotInstallable(Exception):
    """Node or npm is missing: the tests that need Letta Code are skipped."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stateloop-tests" / f"letta-code-{VERSION}"


def letta_code() -> Path:
    """``letta.js`` of the pinned Letta Code, installed first if it is not in the cache
    (one process installs, the others wait on the lock). An install that fails is tried
    once more, then raises with npm's output."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise NotInstallable("node and npm are not installed (apt-get install -y nodejs npm); "
                             "the Letta Code tests need them")
    target = cache_dir()
    script = target / "node_modules" / "@letta-ai" / "letta-code" / "letta.js"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not script.exists():
            failures = []
            for _ in range(2):  # a registry hiccup is retried once
                problem = _install(npm, target)
                if problem is None:
                    break
                failures.append(problem)
            else:
                raise RuntimeError("npm could not install Letta Code:\n" + "\n".join(failures))
    return script


def _install(npm: str, target: Path) -> str | None:
    """Install into a fresh directory beside ``target``, then move it into place; npm's
    output if it failed."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        for stub, name in (("letta-agent-sdk", "@letta-ai/letta-agent-sdk"),
                           ("trajectory", "@letta-ai/trajectory")):
            (staging / "stub" / stub).mkdir(parents=True)
            (staging / "stub" / stub / "package.json").write_text(
                json.dumps({"name": name, "version": "0.0.0"}))
        (staging / "package.json").write_text(json.dumps({
            "name": "letta-code-for-tests", "private": True,
            "dependencies": {"@letta-ai/letta-code": VERSION}, "overrides": OVERRIDES}))
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts",
                               "--loglevel=error"], cwd=staging, capture_output=True,
                              text=True, timeout=INSTALL_TIMEOUT)
        if done.returncode != 0:
            return done.stdout + done.stderr
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        return None
    except subprocess.TimeoutExpired:
        return f"npm install took over {INSTALL_TIMEOUT} s"
    finally:
        shutil.rmtree(staging, ignore_errors=True)
