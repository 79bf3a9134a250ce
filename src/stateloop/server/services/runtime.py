"""The server's live state: the store, its live agents (a ``LiveAgents`` that loads them
with the tools bound here, at most ``live_agents`` of them, the idle ones least recently used
let go first), tool binding, and the runs in flight."""

from __future__ import annotations

import asyncio
import copy
import logging
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ...agent import Agent
from ...live_agents import LiveAgents, bind
from ...llm import registered
from ...llm.listing import ModelListings
from ...mcp import close_all as close_mcp_sessions
from ...memory.embedding_models import Embedders
from ...memory.embeddings import Embedder
from ...scheduler import Scheduler
from ...store import ToolRecord
from ...tools import Tool
from ...tools.builtin import builtin_names, builtin_tool, builtin_tool_type
from ...tools.bwrap import bwrap_mode
from ...tools.code import server_code_tool
from ...tools.confinement import memory_bound
from ...tools.pool import WorkerPool
from ...tools.sandbox import (
    Isolation,
    SandboxedToolError,
    SandboxLimits,
    sandboxed_tool,
    stop_workers,
)
from ...tools.source_reader import SourceReader
from ..limits import UsageMeter
from ..settings import ServerSettings
from . import fleet
from .batches import BatchRunner
from .byok import KeyBox, ProviderBook
from .callbacks import Callbacks
from .mcp_bridge import MCPPolicy, bound_tool
from .runs import RunRegistry
from .tool_env import agent_env

if TYPE_CHECKING:
    from ...store.sql import SqlStore

logger = logging.getLogger("stateloop.server")

SLEEPTIME_GRACE = 2.0  # seconds a memory agent's run may take to finish at shutdown
RETURN_CHAR_LIMIT = 50_000  # Letta's default for a tool's return_char_limit

class Runtime:
    """Everything the routes share. One per app; lives on ``app.state.runtime``. Its
    ``agents`` own the live agents; their multi-agent tools find each other there."""

    def __init__(self, settings: ServerSettings, store: SqlStore,
                 python_tools: Iterable[Tool] = ()) -> None:
        self.settings = settings
        self.store = store
        self.python_tools = {tool.name: tool for tool in python_tools}
        self.limits = SandboxLimits(settings.tool_timeout, settings.tool_memory_mb,
                                    output_bytes=settings.tool_output_bytes,
                                    processes=settings.tool_processes,
                                    call_memory_mb=settings.tool_call_memory_mb)
        # Sources from clients are parsed in child processes under the same limits.
        self.sources = SourceReader(max_bytes=settings.tool_source_bytes,
                                    memory_mb=settings.tool_memory_mb,
                                    timeout=settings.tool_timeout)
        self.sandbox_problem: str | None = None  # why bubblewrap is unusable, found at start
        self._own_uid: bool | None = None  # each worker a uid of its own (see bwrap_mode)
        self.workers = WorkerPool()  # sandboxes of the source tools called, per bound tool
        self.runs = RunRegistry(events_per_run=settings.run_buffer_events,
                                finished_runs=settings.run_buffer_runs)
        # Fires scheduled messages; set by the app's lifespan (routes/schedules.py fires).
        self.scheduler: Scheduler | None = None
        # Runs message batches' requests; set by the app's lifespan (routes/batches.py runs).
        self.batches: BatchRunner | None = None
        # Counts each project's model tokens a day, when usage is counted (set at start):
        # the runs batches and schedules start are billed and limited by it too.
        self.meter: UsageMeter | None = None
        self.callbacks = Callbacks(store, timeout=settings.callback_timeout,
                                   private_ok=settings.callback_private_urls)
        self.agents = LiveAgents(store, Agent, load=self._load, limit=settings.live_agents,
                                 dropped=_stop_tools)
        # Every embedding model agents, archives and folders ask for, each made once.
        self.embedders = Embedders(settings.embedding_endpoint(), default=settings.embedding)
        # What the configured providers list (GET /v1/models), refreshed in the background.
        # openai/ is where the server's settings point it (STATELOOP_MODEL_BASE_URL, ...).
        openai = settings.model_options()
        self.model_listings = ModelListings(overrides={
            variable: openai[option] for option, variable in (
                ("base_url", "OPENAI_BASE_URL"), ("api_key", "OPENAI_API_KEY"))
            if option in openai})
        # Providers added over /v1/providers, their keys sealed with the operator's key.
        self.providers = ProviderBook(store, KeyBox(settings),
                                      private_ok=settings.provider_private_urls)
        self._outer_lookup: registered.Lookup | None = None

    async def start(self) -> None:
        """Check that source tools can be isolated; register built-in and Python tools, so
        they list and attach like any other."""
        self._own_uid, self.sandbox_problem = await asyncio.to_thread(
            bwrap_mode, self.settings.tool_bwrap)
        if self.sandbox_problem is None and os.geteuid() == 0 and not self._own_uid:
            logger.warning("bubblewrap cannot set up as root here: source tools run in a user "
                           "namespace, where their process count is bounded by the timeout only")
        if self.sandbox_problem and self.settings.unsafe_tools:
            logger.warning("STATELOOP_UNSAFE_TOOLS=1: tools created from source run WITHOUT "
                           "isolation (they can read the server's files and environment): %s",
                           self.sandbox_problem)
        elif self.sandbox_problem:
            logger.warning("%s", self.source_tools_refused())
        else:
            bound = await asyncio.to_thread(memory_bound, self.limits.memory_mb,
                                            self.limits.call_memory_mb, self.limits.processes,
                                            own_uid=bool(self._own_uid))
            logger.info("source tools run in bubblewrap sandboxes; %s", bound.describe())
        # A server started inside another's process (a test) hands the lookup back on close.
        self._outer_lookup = registered.use(self.providers)
        await self.providers.refresh()
        await self.upsert_builtin_tools()
        for tool in self.python_tools.values():
            await self.store.upsert_tool(tool_record(tool, binding=f"python:{tool.name}"))
        # Runs a stopped process left running end failed (not those of a live process).
        await self.store.fail_interrupted_runs()
        await self.store.fail_interrupted_files()  # uploads a stopped process was processing
        if self.store.fleet is not None:  # other processes share the database
            fleet.listen(self)
            await self.store.fleet.start()

    async def close(self) -> None:
        registered.use(self._outer_lookup)
        await self.model_listings.close()
        await self.runs.close()
        await self.callbacks.close()
        # Then memory agents' background runs (those the last runs started too): they write
        # to the store.
        await asyncio.gather(*(agent.sleeptime.close(SLEEPTIME_GRACE)
                               for agent in self.agents.live_agents() if agent.sleeptime))
        await self.workers.close()
        await close_mcp_sessions()
        await self.store.close()

    # -- agents --------------------------------------------------------------------------

    def agent_options(self) -> dict[str, Any]:
        """Keyword arguments every live agent gets."""
        return {**self.settings.model_options(), "busy": self.settings.busy,
                "embedder": self.embedder(), "embedders": self.embedders}

    async def agent(self, agent_id: str) -> Agent:
        """The live agent with this id, loaded from the store on first use (or after it was
        let go). It stays live while the task that asked for it runs."""
        return await self.agents.agent(agent_id)

    async def _load(self, agent_id: str) -> Agent:
        """An agent as the server runs it: its tools bound here, the server's options."""
        stored = await self.store.load_agent(agent_id, by_name=False)  # one read transaction
        record = stored.record
        # A provider added on another process, for its model or its embeddings?
        await self.providers.refresh_for(record.model,
                                         (record.embedding_config or {}).get("handle"))
        tools = await self.bind_tools(record.tool_names, agent_env(record), stored.tools)
        options = {**self.agent_options(),  # the embedding the agent asked for
                   "embedder": self.embedders.for_agent(record.embedding_config)}
        live = await Agent.aload(stored, store=self.store, tools=tools, **options)
        if live.sleeptime is not None:  # its memory agent: the live one of its id
            live.sleeptime.loader = self.agents.agent
        bind(live, self.agents)
        return live

    def live(self, agent_id: str) -> Agent | None:
        """The agent if it is live now (``agent`` keeps one live for a task's use)."""
        return self.agents.live(agent_id)

    @property
    def live_count(self) -> int:
        """How many agents are live now."""
        return self.agents.live_count

    def live_agents(self) -> list[Agent]:
        return self.agents.live_agents()

    def forget(self, agent_id: str) -> None:
        """Drop the live agent (deleted, or changed elsewhere) and stop its tools' workers;
        the next use loads it again."""
        self.agents.forget(agent_id)

    # -- tools ---------------------------------------------------------------------------

    async def upsert_builtin_tools(self) -> list[ToolRecord]:
        """The built-in tools' rows, written anew (as this version defines them)."""
        return [await self.store.upsert_tool(tool_record(
                    builtin_tool(name), binding=f"builtin:{name}",
                    tool_type=builtin_tool_type(name)))
                for name in builtin_names()]

    async def bind_tools(self, names: Iterable[str], env: Mapping[str, str] | None = None,
                         records: Mapping[str, ToolRecord] | None = None) -> list[Tool]:
        """Tool objects for the names: built-in tools as this server runs them, Python tools
        given to the server, source tools through the sandbox (``env``: the agent's
        variables); a deleted tool answers every call with an error. ``records``: the
        registered tools of these names, when they were read already."""
        builtins = set(builtin_names())
        names = list(names)
        wanted = [name for name in names if name not in builtins]
        if records is None:
            records = ({record.name: record for record in await self.store.list_tools(wanted)}
                       if wanted else {})
        return [self.builtin(name) if name in builtins
                else self.bind(records[name], env) if name in records else _missing(name)
                for name in names]

    def builtin(self, name: str) -> Tool:
        """The built-in tool ``name``; ``run_code`` (one per agent bound, with warm workers of
        its own) runs in this server's sandbox, with the source tools' limits (and the network
        if STATELOOP_TOOL_NETWORK names it)."""
        if name != "run_code":
            return builtin_tool(name)
        refused = self.source_tools_refused()
        tool = server_code_tool(self.limits, self.isolation(name),
                                None if refused else self.workers)
        if refused:
            tool.function = _refuse(refused)
        return tool

    def bind(self, record: ToolRecord, env: Mapping[str, str] | None = None) -> Tool:
        """The callable for one tool record; a source tool's calls get ``env`` (the agent's
        variables) over the server's."""
        if record.binding and record.binding.startswith("builtin:"):
            return self.builtin(record.name)
        if record.tool_type == "external_mcp":
            return bound_tool(self.store, record, self.mcp_policy())
        # Whether a call pauses for a human is the agent's rule (see with_default_approvals),
        # so the agent can turn it off: the bound tool never asks on its own.
        python = self.python_tools.get(record.name)
        if python is not None and record.binding == f"python:{record.name}":
            if python.requires_approval:
                python = copy.copy(python)
                python.requires_approval = False
            return python
        if record.source_code:
            refused = self.source_tools_refused()
            tool = sandboxed_tool(record.source_code, record.json_schema, limits=self.limits,
                                  isolation=self.isolation(record.name, env),
                                  return_char_limit=record.return_char_limit or RETURN_CHAR_LIMIT,
                                  pool=None if refused else self.workers)
            if refused:
                tool.function = _refuse(refused)
            return tool
        return _missing(record.name)

    def source_tools_refused(self) -> str | None:
        """Why tools from source cannot be created or called here, or None."""
        if self.sandbox_problem is None or self.settings.unsafe_tools:
            return None
        return (f"tools created from source are disabled: bubblewrap cannot isolate them "
                f"({self.sandbox_problem}); install bubblewrap, or set "
                f"STATELOOP_UNSAFE_TOOLS=1 to run them without isolation")

    def mcp_policy(self) -> MCPPolicy:
        """What MCP servers described over REST may do (``STATELOOP_MCP_*``): stdio ones run
        in the source tools' sandbox, or not at all when it cannot isolate them."""
        settings = self.settings
        refused = None
        if self.sandbox_problem and not settings.unsafe_tools:
            refused = (f"stdio MCP servers are off: bubblewrap cannot isolate them "
                       f"({self.sandbox_problem}); install bubblewrap, or set "
                       f"STATELOOP_UNSAFE_TOOLS=1 to run them without isolation")
        return MCPPolicy(stdio_commands=frozenset(settings.mcp_stdio_commands),
                         private_urls=settings.mcp_private_urls,
                         bwrap=None if self.sandbox_problem else settings.tool_bwrap,
                         own_uid=self._own_uid, network=frozenset(settings.tool_network),
                         sandbox_refused=refused, max_message_bytes=settings.tool_output_bytes,
                         return_char_limit=RETURN_CHAR_LIMIT)

    def isolation(self, tool_name: str, env: Mapping[str, str] | None = None) -> Isolation:
        """How calls of this source tool are isolated: its environment is the sandbox's own
        variables, then STATELOOP_TOOL_ENV, then ``env`` (the agent's: it wins, as in Letta)."""
        return Isolation(bwrap=None if self.sandbox_problem else self.settings.tool_bwrap,
                         env={**self.settings.tool_env, **(env or {})},
                         network=tool_name in self.settings.tool_network,
                         own_uid=self._own_uid)

    def embedder(self) -> Embedder:
        """The embedder of what asks for no embedding (``STATELOOP_EMBEDDING``)."""
        return self.embedders.get_default()


def tool_record(tool: Tool, *, binding: str, tool_type: str = "custom",
                source_code: str | None = None) -> ToolRecord:
    """A tools-table row describing ``tool``."""
    return ToolRecord(name=tool.name, description=tool.description,
                      json_schema=tool.spec().to_dict(), tool_type=tool_type,
                      source_type="python", source_code=source_code, binding=binding,
                      default_requires_approval=tool.requires_approval)


def with_default_approvals(rules: list[dict[str, Any]], records: Iterable[ToolRecord]
                           ) -> list[dict[str, Any]]:
    """``rules`` plus a ``requires_approval`` rule for each tool made with
    ``default_requires_approval`` that has none: as in Letta, the default is copied onto the
    agent when the tool is given to it, and from then on the agent's rule decides."""
    have = {rule.get("tool_name") for rule in rules if rule.get("type") == "requires_approval"}
    return [*rules, *({"type": "requires_approval", "tool_name": record.name}
                      for record in records
                      if record.default_requires_approval and record.name not in have)]


def _refuse(reason: str) -> Any:
    async def refuse(**_: Any) -> str:
        raise SandboxedToolError(reason)

    return refuse


def _stop_tools(agent: Agent) -> None:
    """An agent let go or forgotten: its tools' workers stop."""
    for tool in agent.tools.values():
        stop_workers(tool)


def _missing(name: str) -> Tool:
    # No function: every call is answered "has no Python function to run here".
    return Tool(name, f"(tool {name!r} is no longer registered)",
                {"type": "object", "properties": {}}, None)
