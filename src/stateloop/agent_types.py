"""Agent types are presets: a continuation policy and the built-in tools attached by default."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .continuation import Continuation, Heartbeat, LettaV1
from .errors import ConfigError


@dataclass(frozen=True, slots=True)
class AgentType:
    """``base_tools`` are always attached; ``memory_tools`` when the agent has memory blocks;
    ``stored_memory_tools`` when it is persisted (they search the store).
    ``clear_after_run``: the transcript is emptied after each run (memory is kept)."""

    name: str
    continuation: Callable[[], Continuation]
    base_tools: tuple[str, ...] = ()
    memory_tools: tuple[str, ...] = ()
    stored_memory_tools: tuple[str, ...] = ()
    clear_after_run: bool = False


AGENT_TYPES: dict[str, AgentType] = {
    t.name: t
    for t in (
        AgentType("letta_v1_agent", LettaV1, (),
                  ("memory_insert", "memory_replace", "conversation_search"),
                  ("conversation_search",)),
        AgentType("memgpt_agent", Heartbeat, ("send_message",),
                  ("core_memory_append", "core_memory_replace", "conversation_search"),
                  ("conversation_search", "archival_memory_insert", "archival_memory_search")),
        AgentType("react_agent", LettaV1),
        AgentType("workflow_agent", LettaV1, clear_after_run=True),
    )
}


def agent_type(name: str) -> AgentType:
    """The preset called ``name``; a clear error lists the known ones."""
    try:
        return AGENT_TYPES[name]
    except KeyError:
        raise ConfigError(f"unknown agent_type {name!r}; expected one of "
                          f"{', '.join(AGENT_TYPES)}") from None
