"""JSON nested deeper than Python's recursive parser goes, read cut instead of failing."""

from __future__ import annotations

import json
import re
from typing import Any

# What decides nesting in JSON text: brackets, and strings (which may hold brackets).
_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)

# Well inside the parser's reach (about 990 levels under the default recursion limit).
READ_DEPTH = 256


def cut_at_depth(text: str, depth: int) -> str:
    """``text`` up to the first container opened at ``depth``, which becomes an empty one,
    then closed: shallow enough to parse, and still too deep at the same path."""
    closers: list[str] = []
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            closers.append("]" if token == "[" else "}")
            if len(closers) == depth:
                return text[:match.start()] + "[]" + "".join(reversed(closers[:-1]))
        elif token in ("]", "}") and closers:
            closers.pop()
    return text


def loads(text: str | bytes) -> Any:
    """``json.loads``; a value nested past the parser's reach is read cut at ``READ_DEPTH``
    levels, so a stored row written before bodies were checked can still be listed."""
    try:
        return json.loads(text)
    except RecursionError:
        if isinstance(text, bytes):
            text = text.decode()
        return json.loads(cut_at_depth(text, READ_DEPTH))
