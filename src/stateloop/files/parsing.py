"""Uploaded bytes to text: which kinds of file are taken (text, Markdown, CSV, JSON, code,
PDF), and a clear ``FileRejected`` for everything else — an empty file, a PDF the parser
cannot read, binary bytes under a text name, JSON nested too deep, more pages or text than
``Limits`` allow. ``check`` is the cheap part (name, size, the first bytes), done before a
file is stored; ``parse`` reads it whole and runs in the upload worker."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import PurePath

from ..deepjson import READ_DEPTH, deeper_than
from ..errors import StateloopError

PDF = "application/pdf"

# What each extension is, as Letta names the types it takes (text, documents, code).
_TYPES = {
    ".txt": "text/plain", ".text": "text/plain", ".log": "text/plain",
    ".md": "text/markdown", ".markdown": "text/markdown", ".rst": "text/x-rst",
    ".csv": "text/csv", ".tsv": "text/tab-separated-values",
    ".json": "application/json", ".jsonl": "application/jsonl",
    ".yaml": "application/x-yaml", ".yml": "application/x-yaml", ".toml": "application/toml",
    ".xml": "application/xml", ".html": "text/html", ".htm": "text/html", ".css": "text/css",
    ".pdf": PDF,
    ".py": "text/x-python", ".js": "text/javascript", ".ts": "text/x-typescript",
    ".tsx": "text/x-typescript", ".jsx": "text/javascript", ".java": "text/x-java",
    ".go": "text/x-go", ".rs": "text/x-rust", ".c": "text/x-c", ".h": "text/x-c",
    ".cpp": "text/x-c++", ".hpp": "text/x-c++", ".cc": "text/x-c++", ".cs": "text/x-csharp",
    ".rb": "text/x-ruby", ".php": "text/x-php", ".swift": "text/x-swift",
    ".kt": "text/x-kotlin", ".scala": "text/x-scala", ".sh": "text/x-shellscript",
    ".sql": "text/x-sql", ".r": "text/x-r", ".lua": "text/x-lua", ".ini": "text/plain",
    ".cfg": "text/plain",
}
MAX_JSON_DEPTH = READ_DEPTH  # levels a .json file may nest: well inside the parser's reach
SUPPORTED = "PDF, text (.txt, .md), CSV, JSON and code files (.py, .js, .java, ...)"


class FileRejected(StateloopError, ValueError):
    """The upload cannot become a file: ``status`` is the HTTP status that says why."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Limits:
    """What one upload may cost: its size, and what parsing may make of it. The worker that
    parses and embeds it runs within ``cpu_seconds`` of CPU and ``memory_mb`` of address
    space; ``workers`` uploads are processed at once, the others wait (``pending``)."""

    max_bytes: int = 50 * 1024 * 1024  # Letta's per-file limit
    max_pages: int = 1_000
    max_chars: int = 10_000_000  # text extracted from one file
    max_chunks: int = 10_000
    cpu_seconds: int = 300
    memory_mb: int = 1_536
    workers: int = 2


@dataclass(slots=True)
class ParsedFile:
    text: str
    file_type: str  # a MIME type


def file_type(name: str) -> str:
    """The MIME type of a file name (a name without an extension is text, read as UTF-8);
    ``FileRejected`` (415) for a kind not taken."""
    suffix = PurePath(name).suffix.lower()
    kind = _TYPES.get(suffix) if suffix else "text/plain"  # README, Makefile, LICENSE: text
    if kind is None:
        raise FileRejected(f"unsupported file type: {name!r}; supported types: {SUPPORTED}",
                           status=415)
    return kind


def check(name: str, data: bytes, limits: Limits) -> str:
    """What can be told of an upload without reading it whole: its MIME type, or
    ``FileRejected`` for a kind not taken (415), a file too big (413), an empty one, or
    binary bytes under a text name."""
    kind = file_type(name)
    if len(data) > limits.max_bytes:
        raise FileRejected(f"file {name!r} is {len(data)} bytes; the limit is "
                           f"{limits.max_bytes} (STATELOOP_MAX_UPLOAD_BYTES)", status=413)
    if not data:
        raise FileRejected(f"file {name!r} is empty")
    if kind != PDF:
        _sniff(name, data[:8192].decode("utf-8", errors="ignore"), data[:8192])
    return kind


def parse(name: str, data: bytes, limits: Limits = Limits()) -> ParsedFile:
    """The text of an upload, by its name's extension, within ``limits``."""
    kind = check(name, data, limits)
    text = _pdf_text(name, data, limits) if kind == PDF else _text(name, data)
    if len(text) > limits.max_chars:
        raise FileRejected(f"file {name!r} has {len(text)} characters of text; the limit is "
                           f"{limits.max_chars} (STATELOOP_UPLOAD_MAX_CHARS)", status=413)
    if not text.strip():
        raise FileRejected(f"file {name!r} has no text to read")
    if kind == "application/json":
        _check_json(name, text)
    return ParsedFile(text=text, file_type=kind)


def _check_json(name: str, text: str) -> None:
    deep = FileRejected(f"file {name!r} nests JSON more than {MAX_JSON_DEPTH} levels deep; "
                        f"the limit is {MAX_JSON_DEPTH}")
    try:
        value = json.loads(text)
    except RecursionError:  # past the parser's reach, far past the limit
        raise deep from None
    except ValueError as exc:
        raise FileRejected(f"file {name!r} is not valid JSON: {exc}") from None
    if deeper_than(value, MAX_JSON_DEPTH):
        raise deep


def _sniff(name: str, head: str, raw: bytes) -> None:
    if b"\x00" in raw:  # NUL bytes: binary content, whatever the name says
        raise FileRejected(f"file {name!r} is binary, not text")
    controls = sum(1 for ch in head if ord(ch) < 32 and ch not in "\t\n\r\f")
    if controls > len(head) // 100:
        raise FileRejected(f"file {name!r} is binary, not text")


def _text(name: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileRejected(f"file {name!r} is not UTF-8 text (byte {exc.start})") from None
    _sniff(name, text[:8192], data[:8192])
    return text.replace("\r\n", "\n")


def _pdf_text(name: str, data: bytes, limits: Limits) -> str:
    from pypdf import PdfReader  # lazy: pypdf, for PDF files only
    from pypdf.errors import PyPdfError  # lazy: pypdf, for PDF files only

    sections: list[str] = []
    size = 0
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if len(reader.pages) > limits.max_pages:
            raise FileRejected(f"file {name!r} has {len(reader.pages)} pages; the limit is "
                               f"{limits.max_pages} (STATELOOP_UPLOAD_MAX_PAGES)", status=413)
        for number, page in enumerate(reader.pages, 1):
            text = (page.extract_text() or "").strip()
            if not text:
                continue
            # As Letta's parser does: one Markdown section per page.
            sections.append(f"## Page {number}\n\n{text}")
            size += len(sections[-1]) + 2
            if size > limits.max_chars:  # stop reading: the rest cannot be kept anyway
                raise FileRejected(
                    f"file {name!r} has more than {limits.max_chars} characters of text by "
                    f"page {number}; the limit is {limits.max_chars} "
                    "(STATELOOP_UPLOAD_MAX_CHARS)", status=413)
    except FileRejected:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise FileRejected(f"file {name!r} is not a readable PDF: {exc}") from None
    return "\n\n".join(sections)
