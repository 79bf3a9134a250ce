"""The agent's file tools, with Letta's names, arguments and answers: ``open_files``
(windows of files into the context), ``grep_files`` (a regex over the agent's files, with
context lines, 20 matches a page) and ``semantic_search_files`` (over the chunks). An agent
gets them when a folder is attached to it."""

from __future__ import annotations

import re
import weakref
from typing import Any, NotRequired

from typing_extensions import TypedDict

from ..tools.base import ToolContext
from .context import refresh
from .folders import Folders
from .text import lines

FILE_TOOL_NAMES = ("open_files", "grep_files", "semantic_search_files")
GREP_PAGE = 20
GREP_MAX_MATCHES = 1000
MAX_PATTERN = 1000
SEARCH_MAX = 50

_folders: weakref.WeakKeyDictionary[Any, Folders] = weakref.WeakKeyDictionary()


class FileOpenRequest(TypedDict):
    file_name: str
    """Name of the file to open, as "directory/file"."""
    offset: NotRequired[int | None]
    """Line to start from (0-based); the start of the file by default."""
    length: NotRequired[int | None]
    """How many lines to show; the whole file by default."""


def folders_of(agent: Any) -> Folders:
    """The ``Folders`` an agent's tools use (its store, its archival embedder)."""
    found = _folders.get(agent)
    if found is None:
        archival = agent.archival()
        found = _folders[agent] = Folders(agent.store, archival.embedder, archival.embedders)
    return found


async def open_files(ctx: ToolContext, file_requests: list[FileOpenRequest],
                     close_all_others: bool = False) -> str:
    """Open one or more files and load their contents into files section in core memory.
    Maximum of 5 files can be opened simultaneously.

    Args:
        file_requests: The files to open, each with an optional view range (offset and
            length in lines).
        close_all_others: If True, closes all other currently open files first.
    """
    agent = ctx.agent
    folders = folders_of(agent)
    if not file_requests:
        raise ValueError("No file requests provided")
    if len(file_requests) > folders.max_files_open:
        raise ValueError(f"Cannot open {len(file_requests)} files: exceeds configured maximum "
                         f"limit of {folders.max_files_open} files")
    names = [request["file_name"] for request in file_requests]
    closed_first = (await folders.close(agent.id, keep=names)) if close_all_others else []
    summaries, closed = [], []
    for request in file_requests:
        offset, length = request.get("offset"), request.get("length")
        row, evicted = await folders.open(agent.id, request["file_name"], offset=offset,
                                          length=length)
        closed += [name for name in evicted if name not in names]
        span = ("" if offset is None and length is None
                else f" (lines {(offset or 0) + 1}-{(offset or 0) + length})" if length
                else f" (lines {(offset or 0) + 1}-end)")
        summaries.append(f"{row.file_name}{span}")
    await refresh(agent)
    message = (f"* Opened {summaries[0]}" if len(summaries) == 1
               else f"* Opened {len(summaries)} files: {', '.join(summaries)}")
    if closed_first:
        message += (f"\nNote: Closed {len(closed_first)} file(s) due to close_all_others=True: "
                    f"{', '.join(closed_first)}")
    if closed:
        message += (f"\nNote: Closed {len(closed)} least recently used file(s) due to open file "
                    f"limit: {', '.join(closed)}")
    return message


async def grep_files(ctx: ToolContext, pattern: str, include: str | None = None,
                     context_lines: int | None = 1, offset: int | None = None) -> str:
    """Searches file contents for pattern matches with surrounding context.

    Results are paginated - shows 20 matches per call.

    Args:
        pattern: Keyword or regex pattern to search within file contents.
        include: Optional keyword or regex pattern to filter filenames to include in the search.
        context_lines: Number of lines of context to show before and after each match.
        offset: Number of matches to skip before showing results (20 for the second page).
    """
    agent = ctx.agent
    regex = _compile(pattern)
    names = _compile(_glob(include)) if include and include.strip() else None
    rows = await agent.store.agent_files(agent.id)
    if not rows:
        return "No files are currently attached to search"
    if names is not None:
        rows = [row for row in rows if names.search(row.file_name)]
        if not rows:
            return f"No files match the filename pattern '{include}'"
    around = max(0, context_lines or 0)
    matches: list[tuple[str, int, list[str]]] = []
    for row in rows:
        text = (await agent.store.get_file(row.file_id)).content or ""
        file_lines = lines(text)
        for number, line in enumerate(file_lines):
            if len(matches) >= GREP_MAX_MATCHES:
                break
            if regex.search(line):
                lo, hi = max(0, number - around), min(len(file_lines), number + around + 1)
                matches.append((row.file_name, number + 1, [
                    f"{'>' if i == number else ' '} {i + 1}: {file_lines[i]}"
                    for i in range(lo, hi)]))
    if not matches:
        found = f"No matches found for pattern: '{pattern}'"
        return found + (f" in files matching '{include}'" if include else "")
    matched = list(dict.fromkeys(name for name, _, _ in matches))
    await folders_of(agent).touch(agent.id, matched)
    start = max(0, offset or 0)
    shown = matches[start:start + GREP_PAGE]
    more = "+" if len(matches) >= GREP_MAX_MATCHES else ""
    out = [f"Found {len(matches)}{more} total matches across {len(matched)} files (showing "
           f"matches {start + 1}-{start + len(shown)} of {len(matches)}{more})", "=" * 80,
           "\nFiles with matches:"]
    counts = {name: sum(1 for m in matches if m[0] == name) for name in matched}
    out += [f"  - {name}: {count} matches"
            for name, count in sorted(counts.items(), key=lambda item: -item[1])]
    out.append("")
    out += [f"\n=== {name}:{number} ===\n" + "\n".join(context) for name, number, context in shown]
    out.append("")
    out.append(f'To see more matches, call: grep_files(pattern="{pattern}", '
               f"offset={start + GREP_PAGE})" if start + GREP_PAGE < len(matches)
               else "No more matches to show.")
    return "\n".join(out)


async def semantic_search_files(ctx: ToolContext, query: str, limit: int = 5) -> str:
    """Searches file contents using semantic meaning rather than exact matches.

    Args:
        query: The search query text to find semantically similar content.
        limit: Maximum number of results to return.
    """
    agent = ctx.agent
    if not query.strip():
        raise ValueError("Empty search query provided")
    folders = folders_of(agent)
    rows = await agent.store.agent_files(agent.id)
    if not rows:
        return "No files are currently attached to search"
    names = {row.file_id: row.file_name for row in rows}
    hits = await folders.search(list(dict.fromkeys(r.folder_id for r in rows)), query.strip(),
                                max(1, min(limit, SEARCH_MAX)))
    hits = [hit for hit in hits if hit.chunk.file_id in names]
    if not hits:
        return f"No semantic matches found for query: '{query}'"
    files = list(dict.fromkeys(names[hit.chunk.file_id] for hit in hits))
    await folders.touch(agent.id, files)
    summary = (f"Found {len(hits)} matches in {len(files)} file{'s' if len(files) != 1 else ''} "
               f"for query: '{query}'")
    out = [summary, "=" * len(summary)]
    for number, hit in enumerate(hits, 1):
        text_lines = hit.chunk.text.strip().splitlines()
        body = [f"  {line}" for line in text_lines[:20]]
        if len(text_lines) > 20:
            body.append(f"  ... [truncated {len(text_lines) - 20} more lines]")
        out.append(f"\n=== {names[hit.chunk.file_id]} (passage #{number}) "
                   f"(score: {hit.score:.3f}) ===\n" + "\n".join(body))
    return "\n".join(out)


def _compile(pattern: str) -> re.Pattern[str]:
    pattern = pattern.strip()
    if not pattern:
        raise ValueError("Empty search pattern provided")
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"Pattern too complex: {len(pattern)} chars > {MAX_PATTERN} limit")
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"Invalid regex pattern: {exc}") from None


def _glob(include: str) -> str:
    """A simple glob (``*.py``) as a regex, as Letta reads ``include``."""
    include = include.strip()
    if "*" in include and not any(c in include for c in "^$()[]{}\\+"):
        return include.replace(".", r"\.").replace("*", ".*").replace("?", ".") + "$"
    return include


FILE_TOOLS = (open_files, grep_files, semantic_search_files)
