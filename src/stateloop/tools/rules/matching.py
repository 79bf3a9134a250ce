"""A conditional rule's output cases: the tool output decoded as Letta does, and its keys
matched as Letta does (bool, number or string, tolerant of JSON's string-only keys)."""

from __future__ import annotations

import json
from typing import Any


def decode_output(output: str | None) -> Any:
    """The tool output as a value: JSON when it parses, Letta's packaged ``message`` unwrapped."""
    if output is None:
        return None
    value = _try_json(output)
    # Letta stores tool returns as {"status": ..., "message": ..., "time": ...}; imported
    # transcripts carry that shape, and its rules match on the message.
    if isinstance(value, dict) and {"status", "message"} <= value.keys():
        inner = value["message"]
        value = _try_json(inner) if isinstance(inner, str) else inner
    return value


def _try_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def matches(value: Any, raw: str, key: Any) -> bool:
    """Letta's key matching (bool, int, float, str), tolerant of JSON's string-only keys."""
    # Agent Files store every mapping key as a string ("True", "3"), so decode it first.
    key_value = _try_json(key) if isinstance(key, str) else key
    key_bool = _as_bool(key_value)
    if key_bool is not None:
        return _as_bool(value) == key_bool  # case-insensitive, as in Letta
    key_number = _as_number(key_value)
    if key_number is not None:
        return _as_number(value) == key_number
    return str(key) in (raw, str(value)) or key_value == value
