"""Built-in tools, attached by name: ``tools=["send_message", my_tool]``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from ..memory.editing import MEMORY_TOOLS
from ..memory.recall import RECALL_TOOLS
from ..memory.skills import SKILL_TOOLS
from ..memory.tool_memory import PATH_MEMORY_TOOLS
from ..memory.voice import VOICE_TOOLS
from .base import DEFAULT_TIMEOUT, Tool
from .multi_agent import MULTI_AGENT_TOOL_NAMES, MULTI_AGENT_TOOLS


def send_message(message: str) -> str:
    """Sends a message to the human user.

    Args:
        message: Message contents. All unicode (including emojis) are supported.
    """
    return "Sent message successfully."


@functools.cache
def _functions() -> dict[str, Callable[..., Any]]:
    from ..files.tools import FILE_TOOLS  # lazy: folders load numpy and SQLAlchemy
    from .letta_builtins import LETTA_BUILTIN_TOOLS  # lazy: its web tools load httpx2

    return {f.__name__: f for f in (send_message, *MEMORY_TOOLS, *RECALL_TOOLS,
                                    *MULTI_AGENT_TOOLS, *FILE_TOOLS, *PATH_MEMORY_TOOLS,
                                    *VOICE_TOOLS, *SKILL_TOOLS, *LETTA_BUILTIN_TOOLS)}


MEMORY_EDITS = frozenset({"memory_insert", "memory_replace", "memory_rethink", "core_memory_append",
                    "core_memory_replace", "memory", "memory_apply_patch", "rethink_user_memory"})
# Letta's voice tools (tool_type letta_voice_sleeptime_core): stateloop.memory.voice.
VOICE_TOOL_NAMES = ("search_memory", "store_memories", "rethink_user_memory",
                    "finish_rethinking_memory")


def builtin_names() -> list[str]:
    return sorted(_functions())


@functools.cache
def _tool_types() -> dict[str, str]:
    from .letta_builtins import LETTA_BUILTIN_NAMES  # lazy: its web tools load httpx2

    return {**dict.fromkeys(("send_message", "conversation_search", "archival_memory_insert",
                             "archival_memory_search"), "letta_core"),
            **dict.fromkeys(MULTI_AGENT_TOOL_NAMES, "letta_multi_agent_core"),
            **dict.fromkeys(VOICE_TOOL_NAMES, "letta_voice_sleeptime_core"),
            **dict.fromkeys(("open_files", "grep_files", "semantic_search_files"),
                            "letta_files_core"),
            **dict.fromkeys(LETTA_BUILTIN_NAMES, "letta_builtin")}


def builtin_tool_type(name: str) -> str:
    """Letta's ``tool_type`` for the built-in tool called ``name``."""
    return _tool_types().get(name, "letta_memory_core")


@functools.cache
def builtin_tool(name: str) -> Tool:
    """The built-in tool called ``name`` (built on first use, so imports stay fast)."""
    functions = _functions()
    if name not in functions:
        raise ConfigError(f"unknown built-in tool {name!r}; built-in tools are "
                          f"{', '.join(builtin_names())}")
    # Memory edits run one at a time: two edits of one block in a step must not interleave.
    # A message to another agent is bounded by its own reply timeout, not a tool's.
    return Tool.from_function(functions[name], sequential=name in MEMORY_EDITS,
                              timeout=None if name in MULTI_AGENT_TOOL_NAMES else DEFAULT_TIMEOUT)
