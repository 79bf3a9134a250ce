"""What a source tool's child makes of the values crossing the sandbox: the arguments,
checked and converted by the function's own type hints, and the return value as text.

Standard library only: the zygote (``sandbox_child.py``) loads it by path, without the
stateloop package or pydantic. The checks follow pydantic's lax mode for the JSON types a
model sends ("3" for an int, 2.0 for an int, "true" for a bool), and its messages.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import inspect
import json
import typing
from typing import Any


class _Invalid(ValueError):
    pass


def validate(function: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` checked and converted by the function's type hints (the common JSON
    types, leniently as pydantic does: "3" for an int, 2.0 for an int), or a TypeError that
    names every problem."""
    signature = inspect.signature(function)
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # a hint that names what no longer exists: take values as they are
        hints = {}
    problems: list[str] = []
    values: dict[str, Any] = {}
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    for name, parameter in signature.parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name not in arguments:
            if parameter.default is parameter.empty:
                problems.append(f"{name}: Field required")
            continue
        try:
            values[name] = _convert(arguments[name], hints.get(name, Any))
        except _Invalid as exc:
            problems.append(f"{name}: {exc}")
    for name in arguments:
        if name not in signature.parameters:
            if takes_any:
                values[name] = arguments[name]
            else:
                problems.append(f"{name}: Extra inputs are not permitted")
    if problems:
        raise TypeError(f"invalid arguments for tool {function.__name__!r}: "
                        f"{'; '.join(problems)}")
    return values


_TRUE = {"true", "1", "yes", "on", "t", "y"}
_FALSE = {"false", "0", "no", "off", "f", "n"}


def _convert(value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if hint in (Any, object, inspect.Parameter.empty):
        return value
    if hint is None or hint is type(None):
        if value is None:
            return None
        raise _Invalid("Input should be None")
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        return _union(value, typing.get_args(hint))
    if origin is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise _Invalid("Input should be " + " or ".join(map(repr, typing.get_args(hint))))
    if origin is typing.Annotated:
        return _convert(value, typing.get_args(hint)[0])
    if hint is bool:
        return _boolean(value)
    if hint is int:
        return _integer(value)
    if hint is float:
        return _number(value)
    if hint is str:
        if isinstance(value, str):
            return value
        raise _Invalid("Input should be a valid string")
    return _container(value, hint, origin)


def _union(value: Any, members: tuple[Any, ...]) -> Any:
    for member in members:  # an exact type first, as pydantic's smart mode does
        if isinstance(member, type) and type(value) is member:
            return value
    problems = []
    for member in members:
        try:
            return _convert(value, member)
        except _Invalid as exc:
            problems.append(str(exc))
    raise _Invalid("; ".join(problems))


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    if isinstance(value, str | int):
        raise _Invalid("Input should be a valid boolean, unable to interpret input")
    raise _Invalid("Input should be a valid boolean")


def _integer(value: Any) -> int:
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise _Invalid("Input should be a valid integer, got a number with a fractional part")
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise _Invalid("Input should be a valid integer, unable to parse string as an "
                           "integer") from None
    raise _Invalid("Input should be a valid integer")


def _number(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise _Invalid("Input should be a valid number, unable to parse string as a "
                           "number") from None
    raise _Invalid("Input should be a valid number")


def _container(value: Any, hint: Any, origin: Any) -> Any:
    kind = origin or hint
    arguments = typing.get_args(hint)
    if kind in (list, tuple, set, frozenset) or _abstract(kind, "Sequence", "Set"):
        if not isinstance(value, list | tuple):
            raise _Invalid(f"Input should be a valid {getattr(kind, '__name__', 'list')}")
        item = arguments[0] if arguments else Any
        items = [_convert(element, item) for element in value]
        return tuple(items) if kind is tuple else set(items) if kind is set else (
            frozenset(items) if kind is frozenset else items)
    if kind is dict or _abstract(kind, "Mapping", "MutableMapping"):
        if not isinstance(value, dict):
            raise _Invalid("Input should be a valid dictionary")
        item = arguments[1] if len(arguments) == 2 else Any
        return {key: _convert(element, item) for key, element in value.items()}
    validate = getattr(hint, "model_validate", None)  # a pydantic model the source defines
    if callable(validate):
        try:
            return validate(value)
        except ValueError as exc:
            raise _Invalid(str(exc)) from None
    return value  # a type this check does not know: the function sees the JSON value


def _abstract(kind: Any, *names: str) -> bool:
    return getattr(kind, "__module__", "") == "collections.abc" and kind.__name__ in names


# -- the return value ------------------------------------------------------------------------


def format_return(value: Any) -> str:
    """``str`` as is; anything else as compact JSON (pydantic models, dataclasses, dates,
    enums and sets included), else ``str(value)``."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=_plain, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    raise TypeError(f"{type(value).__name__} is not JSON")
