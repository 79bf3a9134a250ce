"""Built-in tools, attached by name: ``tools=["send_message", my_tool]``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from .base import Tool


def send_message(message: str) -> str:
    """Sends a message to the human user.

    Args:
        message: Message contents. All unicode (including emojis) are supported.
    """
    return "Sent message successfully."


_FUNCTIONS: dict[str, Callable[..., Any]] = {f.__name__: f for f in (send_message,)}


def builtin_names() -> list[str]:
    return sorted(_FUNCTIONS)


@functools.cache
def builtin_tool(name: str) -> Tool:
    """The built-in tool called ``name`` (built on first use, so imports stay fast)."""
    if name not in _FUNCTIONS:
        raise ConfigError(f"unknown built-in tool {name!r}; built-in tools are "
                          f"{', '.join(builtin_names())}")
    return Tool.from_function(_FUNCTIONS[name])
