"""Files the folder tests upload: one of each kind, a real PDF built by hand, and bad ones."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

import numpy as np


class HashEmbedder:
    """Deterministic bag-of-words vectors: texts sharing words are close."""

    def __init__(self, model: str = "hash-512", dim: int = 512) -> None:
        self.model, self.dim = model, dim

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace(".", " ").split():
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def processed(client: Any, folder_id: str, file: Any, timeout: float = 120.0) -> Any:
    """The uploaded file once processing ends (``completed`` or ``error``), polled as a Letta
    client does."""
    deadline = time.monotonic() + timeout
    while file.processing_status in ("pending", "parsing", "embedding"):
        assert time.monotonic() < deadline, f"{file.file_name} still {file.processing_status}"
        time.sleep(0.1)
        file = client.folders.files.retrieve(file.id, folder_id=folder_id)
    return file


def pdf(*pages: str) -> bytes:
    """A valid PDF (xref offsets exact) with one line of Helvetica text per page."""
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    font = 3 + 2 * len(pages)
    objects = ["<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>"]
    for i, text in enumerate(pages):
        stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET"
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       f"/Resources << /Font << /F1 {font} 0 R >> >> /Contents {4 + 2 * i} 0 R >>")
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += (f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
            .encode())
    return out


GOOD = {
    "notes.txt": b"The launch moved to Tuesday.\nAda owns the release.\n",
    "guide.md": b"# Guide\n\nInstall with pip.\n\n## Usage\n\nRun the server with make run.\n",
    "people.csv": b"name,role\nAda,release owner\nGrace,reviewer\n",
    "config.json": b'{"region": "eu-west", "replicas": 3}',
    "tool.py": b"def add(a, b):\n    return a + b\n\n\ndef launch_day():\n    return 'Tuesday'\n",
    "report.pdf": pdf("Quarterly revenue grew nine percent", "Churn fell in the north region"),
}

# Refused by the upload itself (4xx, nothing stored): what its name and first bytes tell.
REFUSED_AT_ONCE = {"empty.txt", "junk.txt", "tool.exe"}
BAD = {  # name -> (bytes, words the error names)
    "empty.txt": (b"", "empty"),
    "junk.txt": (bytes(range(256)) * 8, "binary"),
    "broken.pdf": (b"%PDF-1.4\nthis is not a pdf at all", "PDF"),
    "tool.exe": (b"MZ\x90\x00", "unsupported"),
    "bad.json": (b'{"region": ', "JSON"),
}
