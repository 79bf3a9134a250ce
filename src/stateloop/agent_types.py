"""Agent types are presets: a continuation policy and the built-in tools attached by default.

Every value of Letta's ``AgentType`` is accepted. Types whose behaviour stateloop does not
implement as such (voice, split threads) run as the closest preset under their own name, so
an agent keeps the type it was created with. ``sleeptime_agent`` is the memory agent that
``enable_sleeptime`` pairs with a main agent (``sleeptime.py``)."""

from __future__ import annotations

import dataclasses
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


_LETTA_V1 = AgentType("letta_v1_agent", LettaV1, (),
                      ("memory_insert", "memory_replace", "conversation_search"),
                      ("conversation_search",))
_MEMGPT = AgentType("memgpt_agent", Heartbeat, ("send_message",),
                    ("core_memory_append", "core_memory_replace", "memory", "memory_apply_patch",
                     "conversation_search"),
                    ("conversation_search",))
# The memory editor a sleep-time companion runs (see sleeptime.py): it rewrites blocks and
# says when it is done (Letta's BASE_SLEEPTIME_TOOLS).
_SLEEPTIME = AgentType("sleeptime_agent", LettaV1, (),
                       ("memory_replace", "memory_insert", "memory_rethink",
                        "memory_finish_edits"))


def _like(preset: AgentType, name: str) -> AgentType:
    return dataclasses.replace(preset, name=name)


AGENT_TYPES: dict[str, AgentType] = {
    t.name: t
    for t in (
        _LETTA_V1,
        _MEMGPT,
        # MemGPT's loop (heartbeats, send_message) with Letta's newer memory tools.
        AgentType("memgpt_v2_agent", Heartbeat, ("send_message",),
                  ("memory_insert", "memory_replace", "conversation_search"),
                  ("conversation_search",)),
        AgentType("react_agent", LettaV1),
        AgentType("workflow_agent", LettaV1, clear_after_run=True),
        _SLEEPTIME,
        # The voice agent's memory editor files the transcript away and rewrites the human
        # block (Letta's BASE_VOICE_SLEEPTIME_TOOLS).
        AgentType("voice_sleeptime_agent", LettaV1, (),
                  ("store_memories", "rethink_user_memory", "finish_rethinking_memory")),
        # A conversational agent that answers with send_message and searches its memory.
        AgentType("voice_convo_agent", Heartbeat, ("send_message",), (), ("search_memory",)),
        _like(_MEMGPT, "split_thread_agent"),
    )
}


def agent_type(name: str) -> AgentType:
    """The preset called ``name``; a clear error lists the known ones."""
    try:
        return AGENT_TYPES[name]
    except KeyError:
        raise ConfigError(f"unknown agent_type {name!r}; expected one of "
                          f"{', '.join(AGENT_TYPES)}") from None
