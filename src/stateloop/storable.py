"""What every JSON value from outside must be before it is stored, whichever way it comes
in (a request body, an Agent File, the library): a value that the store, the models and the
response serializer can all hold.

A value is refused, naming the path of its first offending part, when it nests deeper than
``MAX_DEPTH``, holds a number that is not finite (``NaN``, ``Infinity``, ``1e999``), an integer
outside signed 64 bits (SQL's ``BIGINT``), or a string or key with a lone UTF-16 surrogate
(``"\\ud800"``: text that no encoding can store). ``check_json`` reads JSON text (text that
is not JSON is left to the caller); ``check_value`` walks a value already parsed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Annotated, Any

import orjson
from pydantic import Field, TypeAdapter, ValidationError

from .deepjson import MAX_DEPTH, cut_at_depth
from .surrogates import first_lone_surrogate, replace_lone_surrogates

INT_MIN, INT_MAX = -(2**63), 2**63 - 1

# A count or limit an agent holds (its context window, its output limit, a block's size): a
# positive integer that the store's 64-bit columns hold. Request bodies declare their fields
# with it; ``count`` checks one given another way (an Agent File, the library).
Count = Annotated[int, Field(gt=0, le=INT_MAX)]
_COUNT: TypeAdapter[int | None] = TypeAdapter(Count | None)

# An integer outside 64 bits has 19 digits at least: with every digit a "0" and every other
# byte a space, ``_LONG_NUMBER in text.translate(_DIGITS)`` finds one (or a false alarm in a
# string, and the full check runs) several times faster than a regex.
_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_NUMBER = b"0" * 19

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """Why a value is refused: where (``loc``, keys and indexes from the top), what, and a
    type in pydantic's words (``finite_number``, ``int_out_of_range``, ``string_unicode``...)."""

    loc: Path
    msg: str
    type: str

    @property
    def where(self) -> str:
        """The path as ``agents.0.max_tokens``."""
        return ".".join(str(part) for part in self.loc)


class _ParseAgain(Exception):
    """orjson reads an integer over 64 bits as a float: only ``json`` tells what was sent."""


def check_json(text: bytes) -> Problem | None:
    """The first problem in JSON text; None when it is fine or is not JSON at all."""
    if not text:
        return None
    try:  # fast: orjson itself refuses NaN, lone surrogates and nesting over 255
        value = orjson.loads(text)
        if (text.count(b"[") + text.count(b"{") <= MAX_DEPTH
                and _LONG_NUMBER not in text.translate(_DIGITS)):
            return None  # too few brackets to nest too deep, no number long enough: fine
        return _first_problem(value, 1, fast=True)
    except (orjson.JSONDecodeError, _ParseAgain):
        pass
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Problem((), f"not valid UTF-8 (byte {exc.start})", "unicode")
    try:
        try:
            value = json.loads(decoded)
        except RecursionError:  # nested far too deep for a recursive parser
            value = json.loads(cut_at_depth(decoded, MAX_DEPTH + 1))
    except ValueError:
        return None  # not JSON: the caller answers as it does for any unparsable text
    return _first_problem(value, 1, fast=False)


def check_value(value: Any, *, big_ints: bool = False, max_depth: int = MAX_DEPTH
                ) -> Problem | None:
    """The first problem in a value already parsed (by ``json``, say, which reads ``NaN``
    and ``1e999``) or built in Python; None when it is fine. For what a response may show
    rather than what may be stored: ``big_ints`` lets integers of any size pass (JSON
    writes them), ``max_depth`` allows deeper nesting."""
    return _first_problem(value, 1, fast=False, big_ints=big_ints, max_depth=max_depth)


def count(value: Any, name: str) -> int | None:
    """``value`` as a ``Count`` (``None`` stays ``None``), read as a request body's field is
    read; a ``ValueError`` naming ``name`` otherwise."""
    try:
        return _COUNT.validate_python(value)
    except ValidationError:
        raise ValueError(f"{name} must be a positive integer (at most 2**63 - 1), not "
                         f"{value!r}") from None


def _first_problem(value: Any, depth: int, *, fast: bool, big_ints: bool = False,
                   max_depth: int = MAX_DEPTH) -> Problem | None:
    """The first problem in ``value`` at ``depth``; its path is built on the way back, so a
    fine value allocates nothing. ``fast``: orjson parsed it (no NaN, no surrogates)."""
    kind = type(value)
    if kind is dict or kind is list:
        return _first_problem_inside(value, depth, fast, big_ints, max_depth)
    if kind is str:
        return None if fast or not _is_broken(value) else _surrogate(())
    return None if big_ints and kind is int else _number_problem(value, kind, fast)


def _first_problem_inside(container: dict[str, Any] | list[Any], depth: int,
                          fast: bool, big_ints: bool, max_depth: int) -> Problem | None:
    """One loop per container, scalars checked inline: a value of a million numbers costs
    about what parsing it does."""
    if depth > max_depth:
        return Problem((), f"nested deeper than {max_depth} levels", "too_deep")
    pairs = container.items() if isinstance(container, dict) else enumerate(container)
    for key, item in pairs:
        if not fast and isinstance(key, str) and _is_broken(key):
            return _surrogate((replace_lone_surrogates(key),))
        kind = type(item)
        if kind is str:
            if fast or not _is_broken(item):
                continue
            problem: Problem | None = _surrogate(())
        elif kind is int:
            if big_ints or INT_MIN <= item <= INT_MAX:
                continue
            problem = _number_problem(item, kind, fast)
        elif kind is dict or kind is list:
            problem = _first_problem_inside(item, depth + 1, fast, big_ints, max_depth)
        else:
            problem = _number_problem(item, kind, fast)
        if problem:
            loc_key = replace_lone_surrogates(key) if isinstance(key, str) else key
            return Problem((loc_key, *problem.loc), problem.msg, problem.type)
    return None


def _number_problem(value: Any, kind: type, fast: bool) -> Problem | None:
    if kind is float:
        if not math.isfinite(value):
            return Problem((), "numbers must be finite (not NaN or Infinity)",
                             "finite_number")
        if fast and abs(value) >= 2**63:
            raise _ParseAgain
    elif kind is int and not INT_MIN <= value <= INT_MAX:
        return Problem((), "integers must fit in 64 bits (-2**63 to 2**63 - 1)",
                         "int_out_of_range")
    return None


def _is_broken(text: str) -> bool:
    return first_lone_surrogate(text) is not None


def _surrogate(loc: Path) -> Problem:
    return Problem(loc, "text holds a lone UTF-16 surrogate (such as \\ud800), which is "
                     "not a character", "string_unicode")
