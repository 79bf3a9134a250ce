"""The agents a tool can reach: one live ``Agent`` per id, found by id or by tags.

A tool that talks to another agent asks the calling agent's directory. In the library that is
the ``LocalDirectory`` of the agent's store (or of the agents without a store): it finds the
agents made or loaded in this process first, so runs of one agent still queue on one object,
and loads the others from the store, once. The server's ``Runtime`` is the directory of the
agents it serves (``bind`` gives it to each live agent).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .errors import ConfigError
from .store.errors import NotFoundError

if TYPE_CHECKING:
    from .agent import Agent
    from .store.sql import SqlStore


class Directory(Protocol):
    """Where agents are found by the tools that talk to them."""

    async def agent(self, agent_id: str) -> Agent:
        """The live agent with this id; ``NotFoundError`` if there is none."""
        ...

    async def tagged(self, match_all: Sequence[str], match_some: Sequence[str]) -> list[str]:
        """Ids of the agents that have every tag of ``match_all`` and, when ``match_some``
        is not empty, at least one of it."""
        ...


_live: weakref.WeakSet[Agent] = weakref.WeakSet()  # every Agent of this process
_bound: weakref.WeakKeyDictionary[Agent, Directory] = weakref.WeakKeyDictionary()
_local: dict[Any, LocalDirectory] = {}  # by store (None: the agents without one)


def register(agent: Agent) -> None:
    """Make ``agent`` findable by the agents of its store (called as it is made)."""
    _live.add(agent)


def bind(agent: Agent, directory: Directory) -> None:
    """Give ``agent`` a directory other than its store's (the server gives its own)."""
    _bound[agent] = directory


def directory_of(agent: Agent) -> Directory:
    """The directory ``agent``'s tools find other agents in."""
    bound = _bound.get(agent)
    if bound is not None:
        return bound
    store = agent.store
    directory = _local.get(store)
    if directory is None:
        directory = _local[store] = LocalDirectory(store)
    return directory


def matches(tags: Sequence[str], match_all: Sequence[str], match_some: Sequence[str]) -> bool:
    """Letta's rule: every tag of ``match_all``, and one of ``match_some`` if it has any."""
    have = set(tags)
    return set(match_all) <= have and (not match_some or bool(have & set(match_some)))


async def tagged_in_store(store: SqlStore, match_all: Sequence[str],
                          match_some: Sequence[str]) -> list[str]:
    """Ids of the stored agents that match, oldest first; the store narrows, ``matches``
    decides."""
    if match_all:
        found = await store.list_agents(tags=list(match_all), match_all_tags=True)
    else:
        found = await store.list_agents(tags=list(match_some) or None)
    return [record.id for record in found if matches(record.tags, match_all, match_some)]


class LocalDirectory:
    """The agents of one store in this process (``store=None``: those without a store)."""

    def __init__(self, store: SqlStore | None) -> None:
        self.store = store
        self._loaded: dict[str, Agent] = {}  # loaded here: kept, so it is loaded only once
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary())  # a lock belongs to one event loop

    def _find(self, agent_id: str) -> Agent | None:
        for agent in list(_live):
            if agent.id == agent_id and agent.store is self.store:
                return agent
        return None

    async def agent(self, agent_id: str) -> Agent:
        live = self._find(agent_id)
        if live is not None:
            return live
        if self.store is None:
            raise NotFoundError(f"agent with id {agent_id!r} not found")
        lock = self._locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            live = self._find(agent_id)
            if live is None:
                from .agent import Agent

                record = await self.store.get_agent(agent_id)
                if record.id != agent_id:  # found by its name
                    raise NotFoundError(f"agent with id {agent_id!r} not found")
                try:
                    live = await Agent.aload(agent_id, store=self.store)
                except ConfigError as exc:  # e.g. it needs Python tools only its maker has
                    raise ConfigError(f"agent {agent_id!r} is not running in this process and "
                                      f"cannot be loaded here: {exc}") from exc
                self._loaded[agent_id] = live
        return live

    async def tagged(self, match_all: Sequence[str], match_some: Sequence[str]) -> list[str]:
        if self.store is not None:
            return await tagged_in_store(self.store, match_all, match_some)
        return [agent.id for agent in list(_live)
                if agent.store is None and matches(agent.tags, match_all, match_some)]
