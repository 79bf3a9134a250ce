"""``LiveAgents``: the live agents of one store in this process — it makes, loads, caches
and finds them, one live ``Agent`` per id.

Everything that needs an agent by id asks the ``LiveAgents`` of its store: the multi-agent
tools (``live_agents_of(agent)``), a sleeptime memory agent's main agent, the server's routes.
In the library each store (and ``None``: the agents without one) has one, which finds the
agents made in this process first, so runs of one agent still queue on one object, and loads
the others once. The server makes its own, with its loader (tools bound, its options) and
a bound on how many stay live: past it, idle agents are let go, least recently used first,
except those a task (a request, a run) still holds.

This module knows agents only through their public surface; it never imports ``Agent``: the
class to make and load is given (``kind``), by the agent that asks or by the server.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .store.errors import NotFoundError

if TYPE_CHECKING:
    from .agent import Agent
    from .store.sql import SqlStore

Load = Callable[[str], Awaitable["Agent"]]
Write = Callable[["Agent"], Awaitable[None]]

_made: weakref.WeakSet[Agent] = weakref.WeakSet()  # every Agent made in this process
_bound: weakref.WeakKeyDictionary[Agent, LiveAgents] = weakref.WeakKeyDictionary()
_local: dict[Any, LiveAgents] = {}  # the library's, by store (None: agents without one)


def register(agent: Agent) -> None:
    """Make ``agent`` findable by the library's live agents of its store (as it is made)."""
    _made.add(agent)


def bind(agent: Agent, agents: LiveAgents) -> None:
    """Give ``agent`` live agents other than the library's of its store (the server's)."""
    _bound[agent] = agents


def live_agents_of(agent: Agent) -> LiveAgents:
    """The live agents ``agent`` finds other agents among: those it was bound to, else the
    library's of its store, which make and load agents of ``agent``'s own class."""
    bound = _bound.get(agent)
    if bound is not None:
        return bound
    return library_agents(agent.store, type(agent.agent))


def library_agents(store: SqlStore | None, kind: type[Agent]) -> LiveAgents:
    """The library's live agents of ``store`` in this process (made on first use, making and
    loading agents of class ``kind``): the CLI's and every library agent's."""
    agents = _local.get(store)
    if agents is None:
        agents = _local[store] = LiveAgents(store, kind, find_made=True)
    return agents


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


class LiveAgents:
    """The live agents of ``store`` (``None``: the agents without one).

    ``kind`` is the class of the agents made and loaded (``Agent``); ``load`` replaces
    ``kind.aload(agent_id, store=store)``; ``limit`` bounds how many loaded agents stay live
    (``None``: all of them); ``dropped`` is told of each agent let go or forgotten; with
    ``find_made``, agents made elsewhere in this process with this store are found before
    any is loaded (the library's way: the maker keeps them).
    """

    def __init__(self, store: SqlStore | None, kind: type[Agent], *, load: Load | None = None,
                 limit: int | None = None, dropped: Callable[[Agent], None] | None = None,
                 find_made: bool = False) -> None:
        self.store = store
        self.kind = kind
        self.limit = limit
        self._load_one = load or self._load_stored
        self._dropped = dropped
        self._find_made = find_made
        self._agents: OrderedDict[str, Agent] = OrderedDict()  # least recently used first
        self._loading: dict[str, tuple[asyncio.Lock, int]] = {}  # lock, tasks at it
        # The agents each task (a request, a run) took: none of them is let go before it ends.
        self._held: dict[asyncio.Task[Any], set[str]] = {}

    # -- making ----------------------------------------------------------------------------

    async def create(self, model: Any, *, write: Write | None = None,
                     **settings: Any) -> Agent:
        """A new agent of this store (stored when there is one); it is found from now on
        while its maker keeps it, and loaded again after.

        With ``write``, the agent is made in memory (its settings checked, its system prompt
        compiled) and handed to ``write``, which stores it its own way (the server writes
        Letta's record fields with it); the agent returned is that draft, and the live one
        is loaded from the store when first asked for."""
        if write is not None:
            draft = self.kind(model, **settings)
            await write(draft)
            return draft
        if self.store is None:
            return self.kind(model, **settings)
        return await self.kind.acreate(model, store=self.store, **settings)

    async def load(self, agent_id: str, **settings: Any) -> Agent:
        """The agent read from the store now with ``settings`` for ``kind.aload`` (a model
        for this session, say); it is the live one of its id from now on."""
        assert self.store is not None
        agent = self._agents[agent_id] = await self.kind.aload(agent_id, store=self.store,
                                                               **settings)
        return agent

    # -- finding ---------------------------------------------------------------------------

    def live(self, agent_id: str) -> Agent | None:
        """The agent if it is live now, loading nothing."""
        agent = self._agents.get(agent_id)
        if agent is None and self._find_made:
            for made in list(_made):
                if made.id == agent_id and made.store is self.store:
                    return made
        return agent

    async def agent(self, agent_id: str) -> Agent:
        """The live agent with this id, loaded from the store on first use (or after it was
        let go), one load at a time per id; ``NotFoundError`` if there is none. It stays
        live while the task that asked for it runs."""
        live = self.live(agent_id)
        if live is None:
            if self.store is None:
                raise NotFoundError(f"agent with id {agent_id!r} not found")
            # One load at a time per id; the lock stays while anyone waits on it.
            lock, waiting = self._loading.get(agent_id, (asyncio.Lock(), 0))
            self._loading[agent_id] = (lock, waiting + 1)
            try:
                async with lock:
                    live = self.live(agent_id)  # loaded while this waited?
                    if live is None:
                        live = self._agents[agent_id] = await self._load_one(agent_id)
            finally:
                lock, waiting = self._loading[agent_id]
                if waiting > 1:
                    self._loading[agent_id] = (lock, waiting - 1)
                else:
                    del self._loading[agent_id]
        if agent_id in self._agents:
            self._hold(agent_id)
            self._agents.move_to_end(agent_id)
            self._let_go()
        return live

    async def tagged(self, match_all: Sequence[str], match_some: Sequence[str]) -> list[str]:
        """Ids of the agents that have every tag of ``match_all`` and, when ``match_some``
        is not empty, at least one of it."""
        if self.store is not None:
            return await tagged_in_store(self.store, match_all, match_some)
        return [agent.id for agent in list(_made)
                if agent.store is None and matches(agent.tags, match_all, match_some)]

    @property
    def live_count(self) -> int:
        """How many loaded agents are live now."""
        return len(self._agents)

    def live_agents(self) -> list[Agent]:
        """The loaded agents live now, least recently used first."""
        return list(self._agents.values())

    def forget(self, agent_id: str) -> None:
        """Drop the live agent (deleted, changed elsewhere, or let go): the next use loads
        it again."""
        agent = self._agents.pop(agent_id, None)
        if agent is not None and self._dropped is not None:
            self._dropped(agent)

    # -- internals -------------------------------------------------------------------------

    async def _load_stored(self, agent_id: str) -> Agent:
        assert self.store is not None
        stored = await self.store.load_agent(agent_id)  # one read transaction
        if stored.record.id != agent_id:  # found by its name
            raise NotFoundError(f"agent with id {agent_id!r} not found")
        try:
            return await self.kind.aload(stored, store=self.store)
        except ConfigError as exc:  # e.g. it needs Python tools only its maker has
            raise ConfigError(f"agent {agent_id!r} is not running in this process and "
                              f"cannot be loaded here: {exc}") from exc

    def _hold(self, agent_id: str) -> None:
        if self.limit is None:
            return
        task = asyncio.current_task()
        if task is None:
            return
        held = self._held.get(task)
        if held is None:
            held = self._held[task] = set()
            task.add_done_callback(self._release)
        held.add(agent_id)

    def _release(self, task: asyncio.Task[Any]) -> None:
        self._held.pop(task, None)
        self._let_go()

    def _let_go(self) -> None:
        """Over ``limit``: let idle agents go, least recently used first (their next use
        reads them from the store). Those a task holds, or that are busy, stay."""
        if self.limit is None:
            return
        excess = len(self._agents) - self.limit
        if excess <= 0:
            return
        held = set().union(*self._held.values())
        idle = [agent for agent_id, agent in self._agents.items()
                if agent_id not in held and agent.idle]  # the least recently used first
        for agent in idle[:excess]:
            self.forget(agent.id)
