"""A child process killed with SIGKILL while its run hangs in a tool: what a crash leaves."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from patience import STOPS

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def hanging(code: str, marker: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``code`` in a child Python until its hanging tool has written ``marker``; the
    child is killed when the block ends, if it is still there."""
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT)
    try:
        for _ in range(600):
            if marker.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert marker.exists(), "the child never reached the hanging tool"
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(STOPS)


def kill_when_hanging(code: str, marker: Path) -> None:
    """Run ``code`` in a child Python; SIGKILL it (no cleanup of any kind) once its hanging
    tool has written ``marker``."""
    with hanging(code, marker) as child:
        child.kill()
        child.wait(STOPS)
