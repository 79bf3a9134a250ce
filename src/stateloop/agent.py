"""``Agent``: the public face of stateloop — a model, tools and memory, run by the loop.

This module owns making an agent (``Agent(...)``, ``load``), its settings, and its runs:
``run``, ``stream``, ``run_sync``, the queue of runs and the ``LoopConfig`` each is given.
A thread's own state is ``thread_state.ThreadState`` (``agent.state``); its memory and
storage are collaborators (``agent_memory.ThreadMemory``, ``agent_store.ThreadStorage``).
The rest of a thread's face is ``agent_runs.AgentRuns``, which delegates to the thread's
collaborators (steering and approvals, state outside a run, the run lock).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from . import agent_options as options
from . import sleeptime
from .agent_runs import AgentRuns
from .agent_settings import AgentSettings
from .agent_types import agent_type as lookup_agent_type
from .conversation import Conversation, afork, fork, in_memory
from .errors import AgentBusyError, ConfigError
from .hooks import Hooks
from .live_agents import register
from .llm.base import NO_SETTINGS, Model, ModelSettings, settings_dict, stored_settings
from .llm.registry import resolve_model
from .llm.retry import RetryPolicy
from .llm.tokens import message_tokens
from .mcp.agent import offer_tools
from .mcp.config import MCPTools
from .memory.blocks import Block
from .memory.embeddings import default_embedder
from .memory_history import MemoryHistory
from .persistence import Persistence, load_state, run_blocking
from .steering import Delivery
from .store.records import AgentRecord
from .tools import Tool
from .tools.builtin import builtin_names
from .tools.multi_agent import MULTI_AGENT_TOOL_NAMES

if TYPE_CHECKING:
    from .memory.archival import ArchivalMemory
    from .memory.compaction import Strategy
    from .memory.embedding_models import Embedders
    from .memory.embeddings import Embedder
    from .store.sql import SqlStore, StoredAgent
    from .tools.rules import BaseToolRule

logger = logging.getLogger("stateloop")

_creating_async: ContextVar[bool] = ContextVar("stateloop_creating_async", default=False)


class Agent(AgentRuns, MemoryHistory):
    """An agent: a model, tools, a system prompt and core memory blocks, with a conversation.

    ``await agent.run("...")`` (or ``run_sync``) runs it to a stop; ``agent.stream("...")``
    yields every event. A second run continues the same conversation. With
    ``store="sqlite:///PATH"`` every step is persisted and ``Agent.load`` brings it back.
    """

    def __init__(
        self,
        model: str | Model,
        *,
        tools: Iterable[Tool | Callable[..., Any] | str | MCPTools] = (),
        system: str = "",
        blocks: Iterable[Block] = (),
        name: str | None = None,
        agent_type: str = "letta_v1_agent",
        max_steps: int = 50,
        error_threshold: int | None = 3,
        timeout: float | None = None,
        context_window: int | None = None,
        max_tokens: int | None = None,
        parallel_tool_calls: bool = True,
        include_base_tools: bool = True,
        include_multi_agent_tools: bool = False,
        hooks: Hooks | None = None,
        retry: RetryPolicy | None = None,
        tool_rules: Iterable[BaseToolRule | dict[str, Any]] = (),
        approval_timeout: float | None = None,
        steering_delivery: Delivery = "all",
        busy: Literal["queue", "reject"] = "queue",
        compaction: Strategy | None = "summarize",
        compaction_threshold: float = 0.9,
        summarizer: str | Model | None = None,
        store: str | SqlStore | None = None,
        tags: Iterable[str] = (),
        timezone: str = "UTC",
        embedder: Embedder | None = None,
        embedders: Embedders | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        enable_sleeptime: bool = False,
        sleeptime_agent_frequency: int = 5,
        model_settings: ModelSettings | None = None,
        output_type: Any = None,
        output_retries: int = 2,
    ) -> None:
        options.require_positive("max_steps", max_steps)
        if error_threshold is not None:
            options.require_positive("error_threshold", error_threshold)
        options.check_waits(timeout=timeout, approval_timeout=approval_timeout, busy=busy)
        agent_id = f"agent-{uuid.uuid4()}"
        zone = options.timezone(timezone)
        kind = lookup_agent_type(agent_type)
        model_options = {k: v for k, v in (("base_url", base_url), ("api_key", api_key))
                         if v is not None}
        resolved = resolve_model(model, **model_options)
        self.blocks = list(blocks)
        options.check_unique_labels(self.blocks)
        defaults: list[str] = []
        if include_base_tools:
            defaults += kind.base_tools
            if any(not block.read_only for block in self.blocks):  # a memory agent edits
                defaults += sleeptime.main_memory_tools(kind, enable_sleeptime)
            if store is not None:
                defaults += kind.stored_memory_tools
        if include_multi_agent_tools:
            defaults += MULTI_AGENT_TOOL_NAMES  # any type, as in Letta
        tools = list(tools)
        self.mcp_servers = [item for item in tools if isinstance(item, MCPTools)]
        self._mcp_listed: set[int] = set()  # ids of the servers whose tools are in self.tools
        tool_map = options.tool_map([*defaults, *(item for item in tools
                                                  if not isinstance(item, MCPTools))])
        window = options.count("context_window", context_window)
        max_tokens = options.count("max_tokens", max_tokens)
        output_type, output_retries = options.output_type(output_type, output_retries)
        rules = options.parse_rules(tool_rules)
        options.check_compaction(compaction, compaction_threshold)
        self.settings = AgentSettings(
            id=agent_id, name=name or agent_id, agent_type=kind, model=resolved,
            model_options=model_options, system=system, tools=tool_map, tool_rules=rules,
            max_steps=max_steps, error_threshold=error_threshold, timeout=timeout,
            context_window=window, max_tokens=max_tokens,
            parallel_tool_calls=parallel_tool_calls,
            model_settings=model_settings or NO_SETTINGS,
            output_type=output_type, output_retries=output_retries,
            hooks=hooks, retry=retry or RetryPolicy(), approval_timeout=approval_timeout,
            busy=busy, compaction=compaction, compaction_threshold=compaction_threshold,
            summarizer=(resolve_model(summarizer, **model_options)
                        if summarizer is not None else None),
            tags=list(tags), timezone=zone, embedder=embedder, embedders=embedders)
        self.recall_count = 0  # messages stored so far, in context or not
        self.archival_count = 0
        self._archival: ArchivalMemory | None = None
        self._conversations: dict[str, Conversation] = {}  # id -> one opened here
        self._init_thread(steering_delivery)  # the default thread's state (thread_state.py)
        self._sleeptime_wanted = sleeptime.wanted(enable_sleeptime, sleeptime_agent_frequency)
        self.sleeptime = (sleeptime.Sleeptime.in_memory(self, self._sleeptime_wanted)
                          if store is None else None)
        register(self)  # other agents' tools find it (stateloop.live_agents)
        if store is not None and not _creating_async.get():
            run_blocking(lambda: self._create_in(store))

    @classmethod
    async def acreate(cls, model: str | Model, *, store: str | SqlStore | None = None,
                      **settings: Any) -> Agent:
        """``Agent(...)`` for async code: a persisted agent is written without blocking."""
        token = _creating_async.set(True)
        try:
            agent = cls(model, store=store, **settings)
        finally:
            _creating_async.reset(token)
        if store is not None:
            await agent._create_in(store)
        return agent

    async def _create_in(self, store: str | SqlStore) -> None:
        first = self.state.transcript[0]
        message_tokens(first, self.model.name)
        self.state.persist = await Persistence.create(store, self.to_record(), self.blocks, first)
        if self._sleeptime_wanted:
            self.sleeptime = await sleeptime.Sleeptime.create(self, self._sleeptime_wanted)

    @classmethod
    def load(cls, id_or_name: str, *, store: str | SqlStore, model: str | Model | None = None,
             tools: Iterable[Tool | Callable[..., Any] | str] = (), **settings: Any) -> Agent:
        """Bring back a persisted agent; Python tools are re-bound by name from ``tools``."""
        return run_blocking(lambda: cls.aload(id_or_name, store=store, model=model,
                                              tools=tools, **settings))

    @classmethod
    async def aload(cls, id_or_name: str | StoredAgent, *, store: str | SqlStore,
                    model: str | Model | None = None,
                    tools: Iterable[Tool | Callable[..., Any] | str] = (),
                    **settings: Any) -> Agent:
        """``load`` for async code; ``id_or_name`` may also be what ``store.load_agent``
        read."""
        db, stored, blocks, pending = await load_state(store, id_or_name)
        record = stored.record
        given = options.tool_map(tools)
        from .agent_file.library import stored_source_tools  # lazy: ~0.1 s to import

        given.update(await stored_source_tools(db, record.tool_names, given))  # sandboxed
        missing = [n for n in record.tool_names if n not in given and n not in builtin_names()]
        if missing:
            raise ConfigError(f"agent {record.name!r} uses tools that were not given: "
                              f"{', '.join(missing)}; pass them as tools=[...]")
        chosen = model or record.model
        if chosen is None:
            raise ConfigError(f"agent {record.name!r} has no stored model; pass model=...")
        names = [*record.tool_names, *(n for n in given if n not in record.tool_names)]
        agent = cls(chosen, tools=[given.get(n) or n for n in names], system=record.system,
                    blocks=blocks, name=record.name, agent_type=record.agent_type,
                    tool_rules=record.tool_rules, include_base_tools=False, tags=record.tags,
                    timezone=record.timezone or "UTC",
                    context_window=record.llm_config.get("context_window_override"),
                    **{"max_tokens": record.llm_config.get("max_tokens"),
                       "parallel_tool_calls": record.llm_config.get("parallel_tool_calls", True),
                       "model_settings": stored_settings(record.llm_config), **settings})
        agent.settings.id = record.id
        agent.state.persist = Persistence(db, record.id, blocks_token=stored.blocks_token)
        await agent.storage.use_stored(stored.context, pending, loaded=stored)
        agent.sleeptime = sleeptime.Sleeptime.stored(agent, record, stored.group)
        return agent

    # -- threads -------------------------------------------------------------------------

    @property
    def agent(self) -> Agent:
        """The agent whose thread this is: itself (a ``Conversation``'s is its agent)."""
        return self

    @property
    def threads(self) -> list[Thread]:
        """The agent's live threads: its own first, then each conversation opened in this
        process."""
        return [self, *self._conversations.values()]

    # -- conversations -------------------------------------------------------------------

    def conversation(self, id: str | None = None, *, summary: str | None = None,
                     isolated_block_labels: Iterable[str] = (),
                     model: str | Model | None = None) -> Conversation:
        """A thread of this agent: a new one, or (with ``id``) one already made, from the
        store if it is not in memory. See ``Conversation``."""
        live = self._conversations.get(id) if id is not None else None
        if live is not None:
            return live
        if self.state.persist is None:  # nothing to read or write
            if id is not None:
                raise ConfigError(f"agent {self.name!r} has no conversation {id!r}")
            return in_memory(self, summary, list(isolated_block_labels), model, [])
        return run_blocking(lambda: self.aconversation(
            id, summary=summary, isolated_block_labels=isolated_block_labels, model=model))

    async def aconversation(self, id: str | None = None, *, summary: str | None = None,
                            isolated_block_labels: Iterable[str] = (),
                            model: str | Model | None = None) -> Conversation:
        """``conversation`` for async code."""
        if id is not None:
            live = self._conversations.get(id)
            if live is not None:
                return live
            if self.state.persist is None:
                raise ConfigError(f"agent {self.name!r} has no conversation {id!r}")
            return await Conversation.open_stored(self, id)
        return await Conversation.start(self, summary=summary, model=model,
                                        isolated_block_labels=list(isolated_block_labels))

    def fork(self, up_to: str | None = None, *, summary: str | None = None) -> Conversation:
        """A new conversation that starts from copies of this thread's in-context messages,
        through the message ``up_to`` (by default all of them)."""
        return fork(self, up_to, summary=summary)

    async def afork(self, up_to: str | None = None, *,
                    summary: str | None = None) -> Conversation:
        """``fork`` for async code."""
        return await afork(self, up_to, summary=summary)

    async def delete_conversation(self, id: str) -> None:
        """Delete a conversation and its messages (nothing the agent shares); a running one
        must be cancelled first."""
        live = self._conversations.get(id)
        if live is not None and live.running:
            raise AgentBusyError(f"conversation {id!r} is running; cancel it first")
        if self.state.persist is not None:
            await self.state.persist.store.delete_conversation(id)
        elif live is None:
            raise ConfigError(f"agent {self.name!r} has no conversation {id!r}")
        self._conversations.pop(id, None)

    # -- agent files ---------------------------------------------------------------------

    @classmethod
    def import_file(cls, source: Any, *, store: Any, tools: Any = (), name: str | None = None,
                    **settings: Any) -> Agent:
        """Import an Agent File (a path, bytes or a dict) into ``store``; its first agent,
        loaded as ``Agent.load`` would. Options: ``append_copy_suffix``,
        ``override_existing_tools``, ``strip_messages``, ``secrets``, ``embedding``,
        ``strict`` (see ``stateloop.agent_file.ImportOptions``), ``isolation`` for
        the source tools; the rest goes to ``Agent.load``."""
        return run_blocking(lambda: cls.aimport_file(source, store=store, tools=tools,
                                                     name=name, **settings))

    @classmethod
    async def aimport_file(cls, source: Any, *, store: Any, tools: Any = (),
                           name: str | None = None, **settings: Any) -> Agent:
        """``import_file`` for async code."""
        from .agent_file.library import import_file, options_from  # lazy: ~0.1 s to import

        options = options_from(name, settings)
        return await import_file(cls, source, store=store, tools=tools, options=options,
                                 isolation=settings.pop("isolation", None), **settings)

    def export_file(self, *, include_secrets: bool = False, strip_messages: bool = False,
                    memory_history: bool = False) -> dict[str, Any]:
        """The agent as an Agent File (``.af``) dict, as Letta writes them; tool variables
        are left empty unless ``include_secrets``; ``memory_history`` adds the memory's
        commits, which an import keeps."""
        return run_blocking(lambda: self.aexport_file(include_secrets=include_secrets,
                                                      strip_messages=strip_messages,
                                                      memory_history=memory_history))

    async def aexport_file(self, *, include_secrets: bool = False,
                           strip_messages: bool = False,
                           memory_history: bool = False) -> dict[str, Any]:
        """``export_file`` for async code."""
        from .agent_file.library import export_file  # lazy: ~0.1 s to import

        return await export_file(self, include_secrets=include_secrets,
                                 strip_messages=strip_messages, memory_history=memory_history)

    async def _before_run(self) -> None:
        if len(self._mcp_listed) < len(self.mcp_servers):
            await offer_tools(self.mcp_servers, self.tools, self._mcp_listed)  # may raise

    async def aclose(self) -> None:
        """Close the sessions of this agent's MCP servers (a later run reopens them)."""
        for server in self.mcp_servers:
            await server.close()

    def archival(self) -> ArchivalMemory:
        """The archival store of a persisted agent (passages searched by meaning)."""
        if self.state.persist is None:
            raise ConfigError("archival memory needs a persisted agent: "
                              "Agent(..., store='sqlite:///PATH')")
        if self._archival is None:
            from .memory.archival import ArchivalMemory  # lazy: its vector index loads numpy

            self._archival = ArchivalMemory(self.state.persist.store,
                                            self.embedder or default_embedder(), self.embedders)
        return self._archival

    @property
    def embedder(self) -> Embedder | None:
        """What the agent's new archives are embedded with (None: the default embedder)."""
        return self.settings.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder | None) -> None:
        self.settings.embedder = embedder
        self._archival = None  # made again, with this embedder, when next asked for

    def to_record(self) -> AgentRecord:
        """The agent's row as the store keeps it, from its settings now (agent files
        export it)."""
        return AgentRecord(
            name=self.name, id=self.id, agent_type=self.agent_type.name, system=self.system,
            model=self.model.name,
            llm_config={"model": self.model.name, "context_window": self.context_window,
                        "context_window_override": self.settings.context_window,
                        "max_tokens": self.max_tokens,
                        "parallel_tool_calls": self.parallel_tool_calls,
                        "model_settings": settings_dict(self.model_settings)},
            tool_rules=[rule.model_dump(mode="json") for rule in self.tool_rules],
            tool_names=list(self.tools), tags=self.tags, enable_sleeptime=bool(self.sleeptime),
            message_buffer_autoclear=self.agent_type.clear_after_run, timezone=self.timezone)


Thread: TypeAlias = Agent | Conversation  # one thread of an agent: its own, or a conversation
