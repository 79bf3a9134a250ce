"""Built-in tools, attached by name: ``tools=["send_message", my_tool]``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from .base import DEFAULT_TIMEOUT, Tool


def send_message(message: str) -> str:
    """Sends a message to the human user.

    Args:
        message: Message contents. All unicode (including emojis) are supported.
    """
    return "Sent message successfully."


@functools.cache
def _functions() -> dict[str, Callable[..., Any]]:
    from ..files.tools import FILE_TOOLS
    from ..memory.editing import MEMORY_TOOLS
    from ..memory.recall import RECALL_TOOLS
    from .letta_builtins import LETTA_BUILTIN_TOOLS
    from .multi_agent import MULTI_AGENT_TOOLS

    return {f.__name__: f for f in (send_message, *MEMORY_TOOLS, *RECALL_TOOLS,
                                    *MULTI_AGENT_TOOLS, *FILE_TOOLS, *LETTA_BUILTIN_TOOLS)}


MEMORY_EDITS = frozenset({"memory_insert", "memory_replace", "memory_rethink", "core_memory_append",
                    "core_memory_replace"})


def builtin_names() -> list[str]:
    return sorted(_functions())


@functools.cache
def builtin_tool(name: str) -> Tool:
    """The built-in tool called ``name`` (built on first use, so imports stay fast)."""
    functions = _functions()
    if name not in functions:
        raise ConfigError(f"unknown built-in tool {name!r}; built-in tools are "
                          f"{', '.join(builtin_names())}")
    # Memory edits run one at a time: two edits of one block in a step must not interleave.
    # A message to another agent is bounded by its own reply timeout, not a tool's.
    from .multi_agent import MULTI_AGENT_TOOL_NAMES

    return Tool.from_function(functions[name], sequential=name in MEMORY_EDITS,
                              timeout=None if name in MULTI_AGENT_TOOL_NAMES else DEFAULT_TIMEOUT)
