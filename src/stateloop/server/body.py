"""What every JSON request body must be before a route sees it: values that the store, the
models and the response serializer can all hold.

A body is refused, naming the path of its first offending value, when it nests deeper than
``MAX_DEPTH``, holds a number that is not finite (``NaN``, ``Infinity``, ``1e999``), an integer
outside signed 64 bits (SQL's ``BIGINT``), or a string or key with a lone UTF-16 surrogate
(``"\\ud800"``: text that no encoding can store). A body that is not JSON is left to the route.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import orjson

from ..deepjson import MAX_DEPTH, cut_at_depth
from ..surrogates import first_lone_surrogate, replace_lone_surrogates

INT_MIN, INT_MAX = -(2**63), 2**63 - 1

# An integer outside 64 bits has 19 digits at least: with every digit a "0" and every other
# byte a space, ``_LONG_NUMBER in body.translate(_DIGITS)`` finds one (or a false alarm in a
# string, and the full check runs) several times faster than a regex.
_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_NUMBER = b"0" * 19

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class BodyError:
    """Why a body is refused: one item of FastAPI's 422 ``detail`` list."""

    loc: Path
    msg: str
    type: str

    def detail(self) -> list[dict[str, Any]]:
        return [{"loc": ["body", *self.loc], "msg": self.msg, "type": self.type}]


class _ParseAgain(Exception):
    """orjson reads an integer over 64 bits as a float: only ``json`` tells what was sent."""


def check_body(body: bytes) -> BodyError | None:
    """The first problem in a JSON body; None when it is fine or is not JSON at all."""
    if not body:
        return None
    try:  # fast: orjson itself refuses NaN, lone surrogates and nesting over 255
        value = orjson.loads(body)
        if (body.count(b"[") + body.count(b"{") <= MAX_DEPTH
                and _LONG_NUMBER not in body.translate(_DIGITS)):
            return None  # too few brackets to nest too deep, no number long enough: fine
        return _first_problem(value, 1, fast=True)
    except (orjson.JSONDecodeError, _ParseAgain):
        pass
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BodyError((), f"the body is not valid UTF-8 (byte {exc.start})", "unicode")
    try:
        try:
            value = json.loads(text)
        except RecursionError:  # nested far too deep for a recursive parser
            value = json.loads(cut_at_depth(text, MAX_DEPTH + 1))
    except ValueError:
        return None  # not JSON: the route answers as it does for any unparsable body
    return _first_problem(value, 1, fast=False)


def _first_problem(value: Any, depth: int, *, fast: bool) -> BodyError | None:
    """The first problem in ``value`` at ``depth``; its path is built on the way back, so a
    fine body allocates nothing. ``fast``: orjson parsed it (no NaN, no surrogates)."""
    kind = type(value)
    if kind is dict or kind is list:
        return _first_problem_inside(value, depth, fast)
    if kind is str:
        return None if fast or not _is_broken(value) else _surrogate(())
    return _number_problem(value, kind, fast)


def _first_problem_inside(container: dict[str, Any] | list[Any], depth: int,
                          fast: bool) -> BodyError | None:
    """One loop per container, scalars checked inline: a body of a million numbers costs
    about what parsing it does."""
    if depth > MAX_DEPTH:
        return BodyError((), f"nested deeper than {MAX_DEPTH} levels", "too_deep")
    pairs = container.items() if isinstance(container, dict) else enumerate(container)
    for key, item in pairs:
        if not fast and isinstance(key, str) and _is_broken(key):
            return _surrogate((replace_lone_surrogates(key),))
        kind = type(item)
        if kind is str:
            if fast or not _is_broken(item):
                continue
            problem: BodyError | None = _surrogate(())
        elif kind is int:
            if INT_MIN <= item <= INT_MAX:
                continue
            problem = _number_problem(item, kind, fast)
        elif kind is dict or kind is list:
            problem = _first_problem_inside(item, depth + 1, fast)
        else:
            problem = _number_problem(item, kind, fast)
        if problem:
            loc_key = replace_lone_surrogates(key) if isinstance(key, str) else key
            return BodyError((loc_key, *problem.loc), problem.msg, problem.type)
    return None


def _number_problem(value: Any, kind: type, fast: bool) -> BodyError | None:
    if kind is float:
        if not math.isfinite(value):
            return BodyError((), "numbers must be finite (not NaN or Infinity)",
                             "finite_number")
        if fast and abs(value) >= 2**63:
            raise _ParseAgain
    elif kind is int and not INT_MIN <= value <= INT_MAX:
        return BodyError((), "integers must fit in 64 bits (-2**63 to 2**63 - 1)",
                         "int_out_of_range")
    return None


def _is_broken(text: str) -> bool:
    return first_lone_surrogate(text) is not None


def _surrogate(loc: Path) -> BodyError:
    return BodyError(loc, "text holds a lone UTF-16 surrogate (such as \\ud800), which is "
                     "not a character", "string_unicode")
