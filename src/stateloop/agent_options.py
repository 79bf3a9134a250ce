"""Checks and conversions of ``Agent``'s arguments, each failing with a message naming the field."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from . import storable
from .errors import ConfigError, InputTooLarge
from .llm.tokens import is_exact, message_tokens
from .memory.blocks import Block
from .memory.compaction import _tools_upper_bound, _upper_bound, tool_tokens
from .messages import Message, user
from .tools import Tool
from .tools.builtin import builtin_tool

if TYPE_CHECKING:
    from .llm.base import ToolSpec
    from .structured_output import StructuredOutput
    from .tools.rules import BaseToolRule

Input = str | Message | Sequence[str | Message] | None


def parse_rules(rules: Iterable[BaseToolRule | dict[str, Any]]) -> list[Any]:
    rules = list(rules)
    if not rules:
        return []
    from .tools.rules import parse_tool_rules  # lazy: builds pydantic models, when rules are given

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


def check_fits(messages: list[Message], *, system: Message, tools: list[ToolSpec],
               window: int, reserve: int, model: str | None) -> None:
    """Refuse input that can never fit the context window (``InputTooLarge``): more tokens
    than the system prompt, the tool definitions and the answer's reserve leave, which no
    compaction frees. A cheap bound (a token is at least a byte) clears nearly every input
    uncounted; the rest is counted exactly, and each count is kept on its message."""
    if not messages:
        return
    bound = sum(_upper_bound(m) for m in messages) + _upper_bound(system)
    if bound + _tools_upper_bound(tools) + reserve <= window:
        return
    fixed = message_tokens(system, model) + tool_tokens(tools, model)
    room = window - reserve - fixed
    if room <= 0:
        return  # the system prompt does not fit either: the run stops for that, naming it
    tokens = sum(message_tokens(m, model) for m in messages)
    if tokens > room:
        raise InputTooLarge(
            f"the input is {tokens:,} tokens{'' if is_exact(model) else ' (estimated)'}; "
            f"the context window of {window:,} leaves {room:,} for input after the system "
            f"prompt and tool definitions ({fixed:,}) and the answer's reserve "
            f"({reserve:,}): send less at once (archival memory holds long texts)",
            tokens=tokens, room=room, window=window)


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


def count(name: str, value: Any) -> int | None:
    """A context window or output limit as every way in reads it (``storable.Count``)."""
    try:
        return storable.count(value, name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def timezone(name: str) -> str:
    """An IANA timezone name (``UTC``, ``Europe/Oslo``), checked."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigError(f"timezone {name!r} is not an IANA timezone name, such as "
                          "'UTC' or 'Europe/Oslo'") from None
    return name


def check_compaction(strategy: object, threshold: float) -> None:
    if strategy not in ("summarize", "sliding_window", None):
        raise ConfigError(f"compaction must be 'summarize', 'sliding_window' or None, "
                          f"got {strategy!r}")
    if not 0 < threshold <= 1:
        raise ConfigError(f"compaction_threshold must be in (0, 1], got {threshold!r}")


def check_waits(*, timeout: float | None, approval_timeout: float | None, busy: str) -> None:
    for label, seconds in (("timeout", timeout), ("approval_timeout", approval_timeout)):
        if seconds is not None and seconds <= 0:
            raise ConfigError(f"{label} must be a positive number of seconds, got {seconds!r}")
    if busy not in ("queue", "reject"):
        raise ConfigError(f"busy must be 'queue' or 'reject', got {busy!r}")

def output_type(output_type: Any, retries: int) -> tuple[Any, int]:
    """``Agent``'s ``output_type`` and ``output_retries``, checked."""
    typed_output(output_type, retries)
    return output_type, retries


def typed_output(output_type: Any, retries: int) -> StructuredOutput | None:
    """A run's typed answer (``output_type`` checked by pydantic), or None for text."""
    if output_type is None:
        return None
    from .structured_output import StructuredOutput  # lazy: builds pydantic models

    return StructuredOutput(output_type, retries)
