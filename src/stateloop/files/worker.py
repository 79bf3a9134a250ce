"""The upload worker, a process of its own: ``python -m stateloop.files.worker DIR`` parses
``DIR/upload`` as ``DIR/job.json`` says, within CPU, memory and file-size limits it sets on
itself before it reads a byte, chunks the text and, with the offline embedder, embeds the
chunks. Progress goes to stdout, one JSON object a line; the text, chunks and vectors go to
files in ``DIR`` (see ``processing.py``, the server's side)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

from ..memory.embeddings import MiniLMEmbedder
from .parsing import FileRejected, Limits, parse
from .text import chunk

PR_SET_PDEATHSIG = 1  # prctl(2)


def die_with(parent: int) -> None:
    """End when the server does, even killed: Linux's parent-death signal."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it was gone before the signal was asked for
        os._exit(1)


def limit_self(limits: Limits) -> None:
    """CPU seconds, address space and the size of any file written; and a lower priority,
    so the server's own work comes first."""
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    memory = limits.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    written = 8 * limits.max_chars + limits.max_chunks * 4 * 4096 + (16 << 20)
    resource.setrlimit(resource.RLIMIT_FSIZE, (written, written))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.nice(10)


def tell(**progress: Any) -> None:
    print(json.dumps(progress), flush=True)


def run(folder: Path) -> None:
    """Process the job in ``folder``; a refusal is written as its result, not raised."""
    job = json.loads((folder / "job.json").read_text())
    die_with(job["parent"])
    limits = Limits(**job["limits"])
    limit_self(limits)
    try:
        parsed = parse(job["name"], (folder / "upload").read_bytes(), limits)
        pieces = chunk(parsed.text)
        if len(pieces) > limits.max_chunks:
            raise FileRejected(f"file {job['name']!r} makes {len(pieces)} chunks; the limit is "
                               f"{limits.max_chunks} (STATELOOP_UPLOAD_MAX_CHUNKS)", status=413)
    except FileRejected as exc:
        (folder / "result.json").write_text(json.dumps({"error": str(exc),
                                                        "status": exc.status}))
        return
    (folder / "text").write_text(parsed.text, encoding="utf-8")
    (folder / "chunks.json").write_text(json.dumps(pieces), encoding="utf-8")
    tell(total_chunks=len(pieces))
    if job.get("embed") is not None:
        embed(folder, pieces, job["embed"])
    (folder / "result.json").write_text(json.dumps({"file_type": parsed.file_type}))


def embed(folder: Path, pieces: list[str], spec: dict[str, Any]) -> None:
    """Embed with the offline model, a batch at a time, telling how many are done."""
    import numpy as np  # lazy: numpy, in the worker process only

    embedder = MiniLMEmbedder(threads=spec.get("threads") or 1, model_file=spec["model_file"])
    out = np.zeros((len(pieces), embedder.DIM), dtype=np.float32)
    step = 4 * embedder.BATCH
    for start in range(0, len(pieces), step):
        out[start:start + step] = embedder.embed_sync(pieces[start:start + step])
        tell(chunks_embedded=min(len(pieces), start + step))
    np.save(folder / "vectors.npy", out)


def main() -> None:
    try:
        run(Path(sys.argv[1]))
    except MemoryError:
        tell(out_of_memory=True)
        sys.exit(3)
    except Exception as exc:  # onnxruntime reports a failed allocation as its own error
        if "bad_alloc" not in str(exc):
            raise
        tell(out_of_memory=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
