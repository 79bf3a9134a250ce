"""Splits a docstring into a summary and per-parameter descriptions (Google or NumPy style)."""

from __future__ import annotations

import inspect
import re

_GOOGLE_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params)\s*:\s*$")
_GOOGLE_OTHER = re.compile(
    r"^(Returns?|Raises|Yields|Examples?|Notes?|Attributes|See Also)\s*:\s*$")
_GOOGLE_PARAM = re.compile(r"^(\*{0,2}\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_NUMPY_UNDERLINE = re.compile(r"^-{3,}\s*$")
_NUMPY_PARAM = re.compile(r"^(\*{0,2}\w+)\s*(?::\s*(.*))?$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(summary, {parameter: description})``; the summary is the text before any section."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    summary: list[str] = []
    section: str | None = None  # "google-params", "numpy-params", "other"
    current: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if _NUMPY_UNDERLINE.match(nxt) and stripped:
            section = "numpy-params" if stripped in ("Parameters", "Args", "Arguments") else "other"
            current = None
            i += 2
            continue
        if _GOOGLE_SECTION.match(stripped):
            section, current = "google-params", None
        elif _GOOGLE_OTHER.match(stripped):
            section, current = "other", None
        elif section is None:
            summary.append(line)
        elif section == "google-params":
            indent = len(line) - len(line.lstrip())
            match = _GOOGLE_PARAM.match(stripped)
            if match and indent <= 4 and stripped:
                current = match.group(1).lstrip("*")
                params[current] = match.group(3).strip()
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
        elif section == "numpy-params":
            indent = len(line) - len(line.lstrip())
            match = _NUMPY_PARAM.match(stripped)
            if match and indent == 0 and stripped:
                current = match.group(1).lstrip("*")
                params[current] = ""
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
        i += 1
    return "\n".join(summary).strip(), params
