"""What the sandbox tests share: markers that find a test's own processes on the host (the
``leftovers`` fixture in conftest kills whatever still runs with one when a test ends)."""

from __future__ import annotations

import uuid
from pathlib import Path


def new_marker() -> str:
    """A `sleep` duration unique to one test: found in a process's command line, it is ours."""
    return f"60.{uuid.uuid4().int % 10**12:012d}"


def processes_with(marker: str) -> list[int]:
    """The pids of the processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue  # gone meanwhile
    return found
