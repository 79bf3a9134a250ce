"""A child process killed with SIGKILL while its run hangs in a tool: what a crash leaves."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def kill_when_hanging(code: str, marker: Path) -> None:
    """Run ``code`` in a child Python; SIGKILL it (no cleanup of any kind) once its hanging
    tool has written ``marker``."""
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT)
    try:
        for _ in range(600):
            if marker.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert marker.exists(), "the child never reached the hanging tool"
        child.kill()
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
