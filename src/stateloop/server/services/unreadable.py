"""A stored record (an agent, a block, a tool) that its response model cannot carry, shown
all the same, so one bad row never breaks a list.

Rows written by an older version, or edited in the database, may hold what no way in lets
through today and no response can carry (``NaN``, infinity, a string where a number goes, a
lone surrogate; an integer over 64 bits is shown as it is). ``readable`` answers such a
row's view with each offending value replaced — text with its lone surrogates replaced by
U+FFFD, anything else by ``null`` or, where the model takes no ``null``, by an empty value
of its type — and ``metadata.error`` saying which fields could not be read. ``unreadable``
tells a view so marked, for a route that answers one record to say so instead.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from ...deepjson import MAX_DEPTH
from ...storable import check_value
from ...surrogates import first_lone_surrogate, replace_lone_surrogates

ERROR_TYPE = "unreadable_record"
# What stands for a value the model refuses where it takes no null, by pydantic's error type.
_EMPTY: dict[str, Any] = {"int_type": 0, "float_type": 0.0, "string_type": "",
                          "bool_type": False, "list_type": [], "dict_type": {}}

Path = tuple[str | int, ...]
M = TypeVar("M", bound=BaseModel)


def readable(model: type[BaseModel], view: dict[str, Any], *,
             metadata: str = "metadata") -> dict[str, Any]:
    """``view`` if ``model`` carries it and JSON holds it; else a copy with each offending
    value replaced and ``error`` in its ``metadata`` field (a tool's is ``metadata_``)
    naming the fields."""
    return _readable(model, view, metadata)[0]


def readable_json(model: type[BaseModel], views: list[dict[str, Any]], *,
                  metadata: str = "metadata") -> bytes:
    """A JSON array of ``readable``'s views as ``model`` shows them (aliases, defaults), each
    validated once. The common case is checked whole: every view validates, and the JSON
    written holds no lone surrogate (the writer refuses one) and no ``NaN`` or
    ``Infinity``; else each view is shown as ``readable`` shows it."""
    adapter = _list_of(model)
    try:
        body = adapter.dump_json([model.model_validate(view) for view in views],
                                 by_alias=True)
    except (ValidationError, PydanticSerializationError):
        pass
    else:
        if b"NaN" not in body and b"Infinity" not in body:  # else perhaps one of them
            return body
    return adapter.dump_json([_readable(model, view, metadata)[1] for view in views],
                             by_alias=True)


@functools.cache
def _list_of(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def _readable(model: type[M], view: dict[str, Any], metadata: str
              ) -> tuple[dict[str, Any], M]:
    problem, valid = _first_problem(model, view)
    if valid is not None:
        return view, valid
    shown = copy.deepcopy(view)
    fields: dict[str, str] = {}
    tries: dict[Path, int] = {}
    while problem is not None:
        loc, msg, kind = problem
        fields.setdefault(".".join(map(str, loc)), msg)
        tries[loc] = tries.get(loc, 0) + 1  # a value, then null, then an empty one
        if tries[loc] > 3 or not _replace(shown, loc, kind):  # not its model's shape at all
            raise ValueError(f"cannot show {view.get('id')!r}: {fields}")
        problem, valid = _first_problem(model, shown)
    kept = shown.get(metadata)
    shown[metadata] = {**(kept if isinstance(kept, dict) else {}), "error": {
        "type": ERROR_TYPE, "fields": fields,
        "message": f"the stored record of {shown.get('id')!r} cannot be read as it is "
                   f"({'; '.join(f'{k}: {v}' for k, v in fields.items())}): set those "
                   "fields again, or delete it"}}
    return shown, model.model_validate(shown)


def unreadable(view: dict[str, Any], *, metadata: str = "metadata") -> str | None:
    """What is wrong with a view ``readable`` marked; None for one shown as stored."""
    error = (view.get(metadata) or {}).get("error")
    if isinstance(error, dict) and error.get("type") == ERROR_TYPE:
        return str(error.get("message"))
    return None


def _first_problem(model: type[M], view: dict[str, Any]
                   ) -> tuple[tuple[Path, str, str] | None, M | None]:
    """The first problem of ``view``, else the model it validates to."""
    # What JSON cannot hold: NaN, a lone surrogate. Free-form fields are already cut at
    # MAX_DEPTH levels of their own (``views.shown``); the view adds a few around them.
    problem = check_value(view, big_ints=True, max_depth=2 * MAX_DEPTH)
    if problem is not None:
        return (problem.loc, problem.msg, problem.type), None
    try:
        return None, model.model_validate(view)
    except ValidationError as exc:
        error = exc.errors()[0]
        return ((tuple(error["loc"]), f"{error['msg']} (not {error.get('input')!r})",
                 error["type"]), None)


def _replace(view: dict[str, Any], loc: Path, kind: str) -> bool:
    """Replace the value at ``loc`` (or the object holding a bad key) by one a step closer to
    what the model takes; False when nothing is left to try."""
    holder: Any = None
    key: str | int = ""
    node: Any = view
    for part in loc:
        try:
            child = node[part]
        except (KeyError, IndexError, TypeError):
            break  # a key that is itself the problem: the object holding it goes
        holder, key, node = node, part, child
    if holder is None:
        return False
    value = holder[key]
    if isinstance(value, str) and first_lone_surrogate(value) is not None:
        holder[key] = replace_lone_surrogates(value)
    elif value is not None:
        holder[key] = None
    elif kind in _EMPTY:
        holder[key] = copy.copy(_EMPTY[kind])
    else:
        return False
    return True
