"""Agent types are presets: a continuation policy and the built-in tools attached by default."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .continuation import Continuation, Heartbeat, LettaV1
from .errors import ConfigError


@dataclass(frozen=True, slots=True)
class AgentType:
    name: str
    continuation: Callable[[], Continuation]
    default_tools: tuple[str, ...] = ()


AGENT_TYPES: dict[str, AgentType] = {
    t.name: t
    for t in (
        AgentType("letta_v1_agent", LettaV1),
        AgentType("memgpt_agent", Heartbeat, ("send_message",)),
        AgentType("react_agent", LettaV1),
        AgentType("workflow_agent", LettaV1),
    )
}


def agent_type(name: str) -> AgentType:
    """The preset called ``name``; a clear error lists the known ones."""
    try:
        return AGENT_TYPES[name]
    except KeyError:
        raise ConfigError(f"unknown agent_type {name!r}; expected one of "
                          f"{', '.join(AGENT_TYPES)}") from None
