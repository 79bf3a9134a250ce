"""Uploaded bytes to text: which kinds of file are taken (text, Markdown, CSV, JSON, code,
PDF), and a clear ``FileRejected`` for everything else — an empty file, a PDF the parser
cannot read, binary bytes under a text name — before anything is stored."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import PurePath

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
SUPPORTED = "PDF, text (.txt, .md), CSV, JSON and code files (.py, .js, .java, ...)"


class FileRejected(StateloopError, ValueError):
    """The upload cannot become a file: ``status`` is the HTTP status that says why."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


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


def parse(name: str, data: bytes) -> ParsedFile:
    """The text of an upload, by its name's extension."""
    kind = file_type(name)
    if not data:
        raise FileRejected(f"file {name!r} is empty")
    text = _pdf_text(name, data) if kind == PDF else _text(name, data)
    if not text.strip():
        raise FileRejected(f"file {name!r} has no text to read")
    if kind == "application/json":
        try:
            json.loads(text)
        except ValueError as exc:
            raise FileRejected(f"file {name!r} is not valid JSON: {exc}") from None
    return ParsedFile(text=text, file_type=kind)


def _text(name: str, data: bytes) -> str:
    if b"\x00" in data[:8192]:  # NUL bytes: binary content, whatever the name says
        raise FileRejected(f"file {name!r} is binary, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileRejected(f"file {name!r} is not UTF-8 text (byte {exc.start})") from None
    controls = sum(1 for ch in text[:8192] if ord(ch) < 32 and ch not in "\t\n\r\f")
    if controls > len(text[:8192]) // 100:
        raise FileRejected(f"file {name!r} is binary, not text")
    return text.replace("\r\n", "\n")


def _pdf_text(name: str, data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise FileRejected(f"file {name!r} is not a readable PDF: {exc}") from None
    # As Letta's parser does: one Markdown section per page.
    return "\n\n".join(f"## Page {i}\n\n{text.strip()}" for i, text in enumerate(pages, 1)
                       if text.strip())
