"""A server process a test started: wait until it answers ``/v1/health``, and stop it."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

import httpx

from patience import ANSWERS, STARTS, STOPS


def wait_until_healthy(url: str, process: subprocess.Popen[Any], output: Callable[[], str],
                       timeout: float = STARTS) -> None:
    """Return once the server at ``url`` answers ``/v1/health``. If its process exits or the
    time runs out first, kill it and fail with ``output()`` (what it printed)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/v1/health", timeout=ANSWERS).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()  # else a server still starting keeps a pipe to it open forever
            process.wait()
            raise AssertionError(f"the server at {url} did not come up:\n{output()}")
        time.sleep(0.1)


def stop(process: subprocess.Popen[Any], sig: int = signal.SIGINT) -> None:
    """Ask the process to exit (SIGINT, as Ctrl-C does), and kill it if it has not within
    STOPS seconds (then the wait's ``TimeoutExpired`` fails the test)."""
    process.send_signal(sig)
    try:
        process.wait(STOPS)
    finally:
        process.kill()
        process.wait()
