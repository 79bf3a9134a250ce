"""How deep JSON may nest: the limit for JSON from outside (request bodies, a model's tool-call
arguments), and values nested deeper than that, or than the parser goes, read or shown cut."""

from __future__ import annotations

import json
import re
from typing import Any

# Letta's own documents nest about 10 levels (an agent file 9, a tool's JSON schema 6). 64 is
# room for any real nested schema or metadata, far from the limits that break later:
# pydantic serializes at most 255 levels, and a response wraps a field in a few more.
MAX_DEPTH = 64

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


def deeper_than(value: Any, levels: int) -> bool:
    """Whether ``value`` has containers nested more than ``levels`` deep."""
    if isinstance(value, dict):
        return levels == 0 or any(deeper_than(v, levels - 1) for v in value.values())
    if isinstance(value, list):
        return levels == 0 or any(deeper_than(v, levels - 1) for v in value)
    return False


def cut(value: Any, levels: int, note: str) -> Any:
    """``value`` with each container deeper than ``levels`` replaced by ``note``."""
    if isinstance(value, dict | list) and levels == 0:
        return note
    if isinstance(value, dict):
        return {key: cut(item, levels - 1, note) for key, item in value.items()}
    if isinstance(value, list):
        return [cut(item, levels - 1, note) for item in value]
    return value
