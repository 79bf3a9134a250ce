"""The sandboxed child checks arguments and formats returns with the standard library only;
it must agree with what pydantic (the in-process path) makes of the same values."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any, Literal, Optional

import pytest
from pydantic import TypeAdapter, ValidationError

from stateloop.tools.execution import format_return as in_process_format
from stateloop.tools.sandbox_values import format_return, validate

CASES: list[tuple[Any, Any]] = [
    (int, 3), (int, "3"), (int, " 7 "), (int, 2.0), (int, 2.5), (int, "many"), (int, None),
    (int, True), (float, 1), (float, "1.5"), (float, "x"), (float, [1]),
    (str, "text"), (str, 5), (str, None),
    (bool, True), (bool, 0), (bool, "yes"), (bool, "off"), (bool, "maybe"), (bool, 2),
    (list[int], ["1", 2]), (list[int], "12"), (list[str], [1]), (list, [1, "a"]),
    (set[int], [1, 1, 2]), (tuple[int, ...], [1, "2"]),
    (dict[str, float], {"a": "1"}), (dict[str, int], {"a": "x"}), (dict, {"a": [1]}),
    (dict, [1]), (Optional[int], None), (Optional[int], "4"),  # noqa: UP045 (typing.Union)
    (int | None, None),
    (int | str, "5"), (str | int, 5), (Literal["walk", "drive"], "walk"),
    (Literal["walk", "drive"], "fly"), (Any, {"any": [1]}), (list[dict[str, int]], [{"a": 1}]),
]


@pytest.mark.parametrize(("hint", "value"), CASES)
def test_arguments_are_checked_as_pydantic_checks_them(hint: Any, value: Any) -> None:
    def tool(x: Any) -> None:
        pass

    tool.__annotations__ = {"x": hint}
    try:
        expected = TypeAdapter(hint).validate_python(value)
    except ValidationError as exc:
        with pytest.raises(TypeError, match="invalid arguments for tool 'tool': x: ") as info:
            validate(tool, {"x": value})
        assert exc.errors()[0]["msg"] in str(info.value) or not isinstance(hint, type)
        return
    converted = validate(tool, {"x": value})["x"]
    assert converted == expected and type(converted) is type(expected)


def test_missing_and_unknown_arguments_are_named() -> None:
    def tool(city: str, days: int = 1) -> None:
        pass

    with pytest.raises(TypeError) as info:
        validate(tool, {"days": 2, "nights": 1})
    assert str(info.value) == ("invalid arguments for tool 'tool': city: Field required; "
                               "nights: Extra inputs are not permitted")
    assert validate(tool, {"city": "Oslo"}) == {"city": "Oslo"}


class Mode(enum.Enum):
    FAST = "fast"


@dataclasses.dataclass
class Trip:
    city: str
    when: datetime.date


@pytest.mark.parametrize("value", [
    42, 1.5, True, None, "text", "é", [1, 2], (1, "a"), {"a": [1, None], "b": {"c": "é"}},
    Trip("Oslo", datetime.date(2026, 1, 2)), datetime.datetime(2026, 1, 2, 3, 4, 5),
    Mode.FAST, b"bytes", {3}])
def test_returns_are_formatted_as_in_process(value: Any) -> None:
    assert format_return(value) == in_process_format(value)
