"""What a costly upload does to the server: ``stateloop serve`` (this checkout, the offline
embedder unless STATELOOP_EMBEDDING says otherwise) on loopback, ``/v1/health`` polled for a
while idle (the baseline), then during a 70 KB decompression-bomb PDF (400 pages sharing one
content stream that inflates to 1.85 MB) and a 5 MB text upload, each watched for at most
``WINDOW`` seconds. Prints the slowest and median health answer against the idle ones (ratio),
the server's RSS (start, peak, end) and its upload workers' peak RSS, and where each file got.

    python bench/uploads.py [WINDOW_SECONDS]
"""

from __future__ import annotations

import io
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

SRC = str(Path(__file__).resolve().parents[1] / "src")


def bomb_pdf(pages: int = 400, inflated: int = 1_850_000) -> bytes:
    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica")}))
    resources = DictionaryObject({NameObject("/Font"): DictionaryObject({
        NameObject("/F1"): font})})
    operators = b"BT /F1 12 Tf 72 720 Td (Hello) Tj ET\n"
    stream = DecodedStreamObject()
    stream.set_data(operators * (inflated // len(operators)))
    contents = writer._add_object(stream.flate_encode(level=9))
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = resources
        page[NameObject("/Contents")] = contents
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def big_text(size: int = 5 * 1024 * 1024) -> bytes:
    words = ["the", "launch", "moved", "to", "tuesday", "and", "ada", "owns", "release"]
    rng = random.Random(7)
    lines = [" ".join(rng.choice(words) for _ in range(14)) for _ in range(size // 60)]
    return "\n".join(lines).encode()[:size]


def watch(url: str, server: psutil.Process, seconds: float, done: object = None,
          ) -> tuple[list[float], list[float], float]:
    """Health latencies, server RSS samples (MB) and the workers' peak RSS (MB) for at most
    ``seconds``, or until ``done()`` says so."""
    latencies, rss, workers = [], [], 0.0
    ends = time.monotonic() + seconds
    with httpx.Client(timeout=seconds + 5) as client:
        while time.monotonic() < ends:
            started = time.perf_counter()
            client.get(f"{url}/v1/health").raise_for_status()
            latencies.append(time.perf_counter() - started)
            rss.append(server.memory_info().rss / 2**20)
            workers = max(workers, sum(p.memory_info().rss for p in server.children(True))
                          / 2**20)
            if callable(done) and len(latencies) % 10 == 0 and done():
                break
            time.sleep(0.1)
    return latencies, rss, workers


def main() -> None:
    window = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PYTHONPATH": SRC, "HOME": home,
               "STATELOOP_DATABASE_URL": f"sqlite:///{home}/bench.db"}
        process = subprocess.Popen([sys.executable, "-m", "stateloop", "serve", "--port",
                                    str(port)], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                try:
                    httpx.get(f"{url}/v1/health", timeout=1).raise_for_status()
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            server = psutil.Process(process.pid)
            idle, _, _ = watch(url, server, 10)
            print(f"uploads: idle health median {statistics.median(idle) * 1000:.1f} ms, "
                  f"max {max(idle) * 1000:.1f} ms over {len(idle)} polls")
            for name, data in (("bomb.pdf", bomb_pdf()), ("big.txt", big_text())):
                folder = httpx.post(f"{url}/v1/folders", json={"name": name}).json()["id"]
                files = f"{url}/v1/folders/{folder}/files"

                def finished(files: str = files) -> bool:
                    status = httpx.get(files, timeout=30).json()[0]["processing_status"]
                    return status in ("completed", "error")

                started = time.perf_counter()
                httpx.post(f"{url}/v1/folders/{folder}/upload", files={"file": (name, data)},
                           timeout=window).raise_for_status()
                answered = time.perf_counter() - started
                latencies, rss, workers = watch(url, server, window, finished)
                [file] = httpx.get(files, timeout=30).json()
                print(f"  {name} ({len(data)} bytes): answered in {answered:.2f} s; health max "
                      f"{max(latencies):.3f} s (ratio {max(latencies) / max(idle):.1f} to "
                      f"idle max), median {statistics.median(latencies) * 1000:.1f} ms; "
                      f"server RSS {rss[0]:.0f} -> peak {max(rss):.0f} -> {rss[-1]:.0f} MB; "
                      f"workers' peak RSS {workers:.0f} MB; after {len(latencies)} polls "
                      f"{file['processing_status']} {file['chunks_embedded']}/"
                      f"{file['total_chunks']} chunks {file['error_message'] or ''}")
                httpx.delete(f"{url}/v1/folders/{folder}", timeout=30)  # stops its worker
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


if __name__ == "__main__":
    main()
