"""Lone UTF-16 surrogates (``"\\ud800"``): Python strings may hold them, but no UTF-8
encoder, JSON writer or database accepts them.

Text that no client can send again (a model's output, a tool's output) has them replaced
with U+FFFD; text a caller gives (run input, blocks) is refused with the position of the
first one (``check``).
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def first_lone_surrogate(text: str) -> int | None:
    """The index of the first surrogate code point in ``text``, if any."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return found.start() if found is not None else None


def replace_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a high and low surrogate
    standing side by side become the character they encode)."""
    if first_lone_surrogate(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def replace_lone_surrogates_in(value: Any) -> Any:
    """``replace_lone_surrogates`` through JSON-like data (keys included)."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, dict):
        return {replace_lone_surrogates_in(k): replace_lone_surrogates_in(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [replace_lone_surrogates_in(item) for item in value]
    return value


def check(text: str, what: str) -> None:
    """Refuse ``text`` holding a lone surrogate with a ``ValueError`` naming ``what``."""
    index = first_lone_surrogate(text)
    if index is not None:
        raise ValueError(f"{what} holds a lone surrogate (U+{ord(text[index]):04X}) at "
                         f"character {index}: text must be valid Unicode")
