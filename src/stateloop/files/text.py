"""A file's text cut two ways: chunks to embed (for ``semantic_search_files``), and numbered
lines for the window an open file shows (``open_files``) and for ``grep_files``."""

from __future__ import annotations

CHUNK_CHARS = 1000  # ~250 tokens: inside MiniLM's 256-token input, near Letta's 300


def chunk(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """Pieces of at most ``size`` characters, cut at paragraph, then line, then word ends."""
    pieces: list[str] = []
    current = ""
    for block in _blocks(text, size):
        if current and len(current) + 1 + len(block) > size:
            pieces.append(current)
            current = ""
        current = f"{current}\n{block}" if current else block
    if current:
        pieces.append(current)
    return [piece.strip() for piece in pieces if piece.strip()]


def _blocks(text: str, size: int) -> list[str]:
    out: list[str] = []
    for line in text.split("\n"):
        while len(line) > size:
            cut = line.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            out.append(line[:cut])
            line = line[cut:].lstrip()
        out.append(line)
    return out


def lines(text: str) -> list[str]:
    """The file's lines (1-based numbering is the caller's); a final newline ends the last."""
    return text.removesuffix("\n").split("\n")


def window(text: str, start: int | None = None, end: int | None = None, *,
           char_limit: int) -> tuple[str, int, int]:
    """Numbered lines ``start``..``end`` (0-based, end exclusive; None = the edge) with a header
    saying what is in view, cut at ``char_limit``; returns (view, first line, last line), lines
    1-based."""
    all_lines = lines(text)
    total = len(all_lines)
    first = start or 0
    if first >= total:
        raise ValueError(f"offset {first} is past the end of the file ({total} lines)")
    last = min(total, end) if end is not None else total
    body: list[str] = []
    used = 0
    for number in range(first, last):
        line = f"{number + 1}: {all_lines[number]}"
        if used + len(line) + 1 > char_limit and body:
            last = number
            break
        body.append(line[:char_limit])
        used += len(line) + 1
    header = (f"[Viewing file start (out of {total} lines)]" if first == 0 and last < total
              else f"[Viewing lines {first + 1} to {last} (out of {total} lines)]"
              if (first, last) != (0, total) else f"[Viewing all {total} lines]")
    return "\n".join([header, *body]), first + 1, last
