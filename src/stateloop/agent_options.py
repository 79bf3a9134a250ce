"""Checks and conversions of ``Agent``'s arguments, each failing with a message naming the field."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .memory.blocks import Block
from .messages import Message, user
from .tools import Tool
from .tools.builtin import builtin_tool

if TYPE_CHECKING:
    from .tools.rules import BaseToolRule

Input = str | Message | Sequence[str | Message] | None


def parse_rules(rules: Iterable[BaseToolRule | dict[str, Any]]) -> list[Any]:
    rules = list(rules)
    if not rules:
        return []
    from .tools.rules import parse_tool_rules  # pydantic models: imported only when used

    return list(parse_tool_rules(rules))


def as_messages(input: Input) -> list[Message]:
    if input is None:
        return []
    if isinstance(input, str | Message):
        input = [input]
    elif not isinstance(input, list | tuple):  # a dict or a set would pass as its keys
        raise _bad_input(input)
    messages = []
    for item in input:
        if isinstance(item, str):
            messages.append(user(item))
        elif isinstance(item, Message):
            messages.append(item)
        else:
            raise _bad_input(item)
    return messages


def _bad_input(found: object) -> TypeError:
    return TypeError(f"input must be a string, a Message or a list of them, "
                     f"not {type(found).__name__}")


def tool_map(items: Iterable[Tool | Callable[..., Any] | str]) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    for item in items:
        if isinstance(item, str):
            found = builtin_tool(item)
        elif isinstance(item, Tool):
            found = item
        elif callable(item):
            found = Tool.from_function(item)
        else:
            raise ConfigError(f"tools must be Tool objects, functions or built-in tool names, "
                              f"not {type(item).__name__}")
        if found.name in tools and tools[found.name] is not found:
            raise ConfigError(f"two different tools are named {found.name!r}")
        tools[found.name] = found
    return tools


def check_unique_labels(blocks: list[Block]) -> None:
    labels = [b.label for b in blocks]
    for label in labels:
        if labels.count(label) > 1:
            raise ConfigError(f"two memory blocks are labelled {label!r}")


def require_positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
