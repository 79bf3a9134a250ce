"""An upload processed in a worker process (``worker.py``), never on the server's event loop
nor in its memory: the bytes are staged in a private temporary folder, the worker parses,
chunks and (with the offline embedder) embeds them within ``Limits``, telling its progress,
and reads back what it wrote there. Cancelling the call kills the worker."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .parsing import FileRejected, Limits

# The worker's environment: nothing of the server's (no keys, no passwords).
_ROOT = str(Path(__file__).resolve().parents[2])  # where this stateloop is imported from
_ENV = {"PYTHONPATH": _ROOT, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}

Progress = Callable[[dict[str, Any]], Awaitable[bool]]


class Stopped(Exception):
    """Processing was stopped because the file is gone (deleted while it was processed)."""


@dataclass(slots=True)
class Processed:
    text: str
    file_type: str
    chunks: list[str]
    vectors: Any  # an (n, dim) float32 array when the worker embedded, else None


async def stage(data: bytes) -> Path:
    """A private temporary folder holding the upload, so that it waits for a worker on disk,
    not in the server's memory."""
    def write() -> Path:
        folder = Path(tempfile.mkdtemp(prefix="stateloop-upload-"))
        (folder / "upload").write_bytes(data)
        return folder

    return await asyncio.to_thread(write)


async def discard(folder: Path) -> None:
    """Remove a staged upload and what its worker wrote."""
    await asyncio.to_thread(shutil.rmtree, folder, True)


async def process(folder: Path, name: str, limits: Limits, *, embed: dict[str, Any] | None,
                  progress: Progress) -> Processed:
    """Parse, chunk and (with ``embed``, the offline model's spec) embed the upload staged
    in ``folder``, in a worker. ``progress`` gets each report (``total_chunks``,
    ``chunks_embedded``) and answers False to stop (``Stopped``); a file the worker refuses,
    or that exceeds a limit, raises ``FileRejected`` naming it."""
    job = {"name": name, "limits": dataclasses.asdict(limits), "embed": embed,
           "parent": os.getpid()}
    await asyncio.to_thread((folder / "job.json").write_text, json.dumps(job))
    await _run(folder, name, limits, progress)
    return await asyncio.to_thread(_read, folder)


async def _run(folder: Path, name: str, limits: Limits, progress: Progress) -> None:
    with (folder / "stderr").open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "stateloop.files.worker", str(folder), cwd=folder, env=_ENV,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            start_new_session=True)
    out_of_memory = False
    try:
        assert proc.stdout is not None
        async for line in proc.stdout:  # lines of a few bytes; a long one ends the read
            report = json.loads(line)
            out_of_memory = out_of_memory or bool(report.get("out_of_memory"))
            if not await progress(report):
                raise Stopped(name)
        code = await proc.wait()
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
    if code == -signal.SIGXCPU or (code == -signal.SIGKILL and not out_of_memory):
        raise FileRejected(f"processing file {name!r} took more than {limits.cpu_seconds} s "
                           "of CPU (STATELOOP_UPLOAD_CPU_SECONDS)", status=413)
    if out_of_memory or code == 3:
        raise FileRejected(f"processing file {name!r} needed more than {limits.memory_mb} MB "
                           "of memory (STATELOOP_UPLOAD_MEMORY_MB)", status=413)
    if code != 0:
        tail = (folder / "stderr").read_bytes()[-400:].decode("utf-8", "replace").strip()
        raise FileRejected(f"processing file {name!r} failed (worker exit {code}): {tail}",
                           status=500)


def _read(folder: Path) -> Processed:
    result = json.loads((folder / "result.json").read_text())
    if "error" in result:
        raise FileRejected(result["error"], status=result["status"])
    vectors = None
    if (folder / "vectors.npy").exists():
        import numpy as np  # lazy: numpy, for embedded chunks only

        vectors = np.load(folder / "vectors.npy", allow_pickle=False)
    return Processed(text=(folder / "text").read_text(encoding="utf-8"),
                     file_type=result["file_type"],
                     chunks=json.loads((folder / "chunks.json").read_text(encoding="utf-8")),
                     vectors=vectors)
