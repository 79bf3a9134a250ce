"""``Agent``: the public face of stateloop — a model, tools and memory, run by the loop.

This module owns making an agent (``Agent(...)``, ``load``), its settings, and its runs:
``run``, ``stream``, ``run_sync``, the queue of runs and the ``LoopConfig`` each is given.
The rest of ``Agent`` comes from its bases, one job each: ``agent_control`` (steering,
cancel, approvals), ``agent_state`` (reset, export, save, compact), ``agent_store`` (the
store), ``agent_memory`` (prompt, context window, recall and archival).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

from . import agent_options as options
from . import sleeptime
from .agent_options import Input
from .agent_threads import AgentThreads
from .agent_types import agent_type as lookup_agent_type
from .approvals import Approval
from .cancellation import CancelScope
from .directory import register
from .eager import shielded
from .errors import ConfigError
from .events import AnyEvent, RunEnd
from .hooks import Hooks
from .llm.base import NO_SETTINGS, Model, ModelSettings, settings_dict, stored_settings
from .llm.registry import resolve_model
from .llm.retry import RetryPolicy
from .llm.tokens import message_tokens
from .loop import LoopConfig, Resume, run_loop
from .mcp.config import MCPTools
from .memory.blocks import Block
from .messages import Message, new_id
from .persistence import Persistence, load_state, run_blocking
from .run_result import Running, RunResult
from .steering import Delivery
from .surrogates import check
from .tools import Tool
from .tools.multi_agent import MULTI_AGENT_TOOL_NAMES

if TYPE_CHECKING:
    from .memory.archival import ArchivalMemory
    from .memory.compaction import Strategy
    from .memory.embedding_models import Embedders
    from .memory.embeddings import Embedder
    from .store.records import AgentRecord
    from .store.sql import SqlStore
    from .tools.rules import BaseToolRule

logger = logging.getLogger("stateloop")

_creating_async: ContextVar[bool] = ContextVar("stateloop_creating_async", default=False)


class Agent(AgentThreads):
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
        self.id = f"agent-{uuid.uuid4()}"
        self.timezone = options.timezone(timezone)
        self.name = name or self.id
        self.agent_type = lookup_agent_type(agent_type)
        self._model_options = {k: v for k, v in (("base_url", base_url), ("api_key", api_key))
                               if v is not None}
        self.model = model  # the setter resolves strings
        self.system = system
        self.blocks = list(blocks)
        options.check_unique_labels(self.blocks)
        defaults: list[str] = []
        if include_base_tools:
            defaults += self.agent_type.base_tools
            if any(not block.read_only for block in self.blocks):  # a memory agent edits
                defaults += sleeptime.main_memory_tools(self.agent_type, enable_sleeptime)
            if store is not None:
                defaults += self.agent_type.stored_memory_tools
        if include_multi_agent_tools:
            defaults += MULTI_AGENT_TOOL_NAMES  # any type, as in Letta
        tools = list(tools)
        self.mcp_servers = [item for item in tools if isinstance(item, MCPTools)]
        self._mcp_listed: set[int] = set()  # ids of the servers whose tools are in self.tools
        self.tools = options.tool_map([*defaults, *(item for item in tools
                                                    if not isinstance(item, MCPTools))])
        self.max_steps = max_steps
        self.error_threshold = error_threshold
        self.timeout = timeout
        self._context_window = options.count("context_window", context_window)
        self.max_tokens = options.count("max_tokens", max_tokens)
        self.parallel_tool_calls = parallel_tool_calls
        self.model_settings = model_settings or NO_SETTINGS
        self.output_type, self.output_retries = options.output_type(output_type, output_retries)
        self.hooks = hooks
        self.retry = retry or RetryPolicy()
        self.tool_rules = options.parse_rules(tool_rules)
        self.approval_timeout = approval_timeout
        self.busy = busy
        options.check_compaction(compaction, compaction_threshold)
        self.compaction: Strategy | None = compaction
        self.compaction_threshold = compaction_threshold
        self.summarizer = (resolve_model(summarizer, **self._model_options)
                           if summarizer is not None else None)
        self.tags = list(tags)
        self.embedder = embedder
        self.embedders = embedders  # the embedders of archives embedded by other models
        self.recall_count = 0  # messages stored so far, in context or not
        self.archival_count = 0
        self._archival: ArchivalMemory | None = None
        self._conversations = {}  # id -> the conversation, once opened
        self._init_thread(steering_delivery)  # the default thread's state (agent_threads)
        self._sleeptime_wanted = sleeptime.wanted(enable_sleeptime, sleeptime_agent_frequency)
        self.sleeptime = sleeptime.Sleeptime.in_memory(self) if store is None else None
        register(self)  # other agents' tools find it (stateloop.directory)
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
        first = self._transcript[0]
        message_tokens(first, self._model.name)
        self._persist = await Persistence.create(store, self._record(), self.blocks, first)
        if self._sleeptime_wanted:
            self.sleeptime = await sleeptime.Sleeptime.create(self, self._sleeptime_wanted)

    @classmethod
    def load(cls, id_or_name: str, *, store: str | SqlStore, model: str | Model | None = None,
             tools: Iterable[Tool | Callable[..., Any] | str] = (), **settings: Any) -> Agent:
        """Bring back a persisted agent; Python tools are re-bound by name from ``tools``."""
        return run_blocking(lambda: cls.aload(id_or_name, store=store, model=model,
                                              tools=tools, **settings))

    @classmethod
    async def aload(cls, id_or_name: str, *, store: str | SqlStore,
                    model: str | Model | None = None,
                    tools: Iterable[Tool | Callable[..., Any] | str] = (),
                    **settings: Any) -> Agent:
        """``load`` for async code."""
        db, record, blocks, messages, pending = await load_state(store, id_or_name)
        given = options.tool_map(tools)
        from .agent_file.library import stored_source_tools
        from .tools.builtin import builtin_names

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
        agent.id = record.id
        agent._persist = Persistence(db, record.id)
        await agent._use_stored(messages, pending)
        agent.sleeptime = await sleeptime.Sleeptime.stored(agent, record)
        return agent

    # -- configuration -------------------------------------------------------------------

    @property
    def model(self) -> Model:
        return self._model

    @model.setter
    def model(self, model: str | Model) -> None:
        self._model = resolve_model(model, **self._model_options)

    @property
    def messages(self) -> list[Message]:
        """The in-context transcript, system prompt first."""
        return list(self._transcript)

    @property
    def store(self) -> SqlStore | None:
        return self._persist.store if self._persist is not None else None

    # -- running -------------------------------------------------------------------------

    async def run(self, input: Input = None, *,
                  approvals: Sequence[Approval] | None = None, max_steps: int | None = None,
                  model: str | Model | None = None, tools: Sequence[Tool] = (),
                  output_type: Any = None) -> RunResult:
        """Run until the agent stops; returns the result (never raises for model/tool failure).

        ``approvals`` resumes a run paused with stop reason ``requires_approval``;
        ``max_steps`` and ``model`` replace the agent's own for this run only; ``tools`` are
        offered for this run only, over the agent's own of the same name; ``output_type``
        makes ``result.output`` a validated answer. Input that
        can never fit the context window raises ``InputTooLarge`` before anything is stored.
        """
        async with self._running(input, approvals, max_steps, model, tools, output_type,
                                 events=False) as running:
            async for _ in running.events:  # straight from the loop: no generator between
                pass
        assert running.end is not None
        return RunResult.from_event(running.end, (output_type or self.output_type) is not None)

    def run_sync(self, input: Input = None, *, approvals: Sequence[Approval] | None = None,
                 output_type: Any = None) -> RunResult:
        """``run`` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(sleeptime.settled(
                self, self.run(input, approvals=approvals, output_type=output_type)))
        raise RuntimeError("run_sync() cannot be called from a running event loop; "
                           "use 'await agent.run(...)' instead")

    async def stream(self, input: Input = None, *, approvals: Sequence[Approval] | None = None,
                     max_steps: int | None = None, model: str | Model | None = None,
                     tools: Sequence[Tool] = (), output_type: Any = None,
                     ) -> AsyncIterator[AnyEvent]:
        """Run and yield every event; runs of one agent are queued in arrival order.
        The other arguments are as for ``run`` (a typed answer is ``RunEnd.data``)."""
        async with self._running(input, approvals, max_steps, model, tools, output_type) as running:
            async for event in running.events:
                yield event

    @contextlib.asynccontextmanager
    async def _running(self, input: Input, approvals: Sequence[Approval] | None,
                       max_steps: int | None, model: str | Model | None,
                       tools: Sequence[Tool] = (), output_type: Any = None, *,
                       events: bool = True) -> AsyncIterator[Running]:
        """A run whose turn has come: its events (with ``events=False``, only its start and
        end), then how it ended, recorded on exit."""
        new_input = options.as_messages(input)
        if len(self._mcp_listed) < len(self.mcp_servers):
            from .mcp.agent import offer_tools

            await offer_tools(self)  # raises MCPConnectionError before anything is stored
        for index, message in enumerate(new_input):
            check(message.text, f"input message {index}: text")
        run_model = resolve_model(model, **self._model_options) if model is not None else None
        options.check_fits(new_input, system=self._transcript[0], tools=self._tool_specs(),
                           window=self.context_window, reserve=self.output_reserve,
                           model=(run_model or self._model).name)
        if max_steps is not None and (type(max_steps) is not int or max_steps < 1):
            raise ConfigError(f"max_steps must be a positive integer, not {max_steps!r}")
        typed = options.typed_output(output_type or self.output_type, self.output_retries)
        async with self._turn():  # runs of one thread queue here, across processes too
            if self._stale:
                await self._reload()  # raises while the store cannot be read
            resume = self._take_pending(new_input, list(approvals or ()))
            if isinstance(resume, RunEnd):  # these approvals were already applied
                yield Running.ended(resume)
                return
            self._refresh_system()
            persist = self._persist
            run_id = persist.start_run() if persist is not None else new_id("run")
            scope = self._scope = CancelScope()
            running: Running | None = None
            try:
                config = self._loop_config(resume)
                if max_steps is not None:
                    config.max_steps = max_steps
                if run_model is not None:
                    config.model = run_model
                if tools:
                    config.tools = {**self.tools, **{tool.name: tool for tool in tools}}
                config.events = events

                def ended(end: RunEnd) -> None:
                    assert running is not None
                    running.end = end
                    self._after_run(end, resume)

                config.on_end = ended
                if typed is not None:
                    typed.apply(config)
                running = Running(run_loop(self._transcript, new_input, config, run_id=run_id,
                                            agent_id=self.id, cancel=scope))
                yield running
            finally:
                self._scope = None
                if persist is not None and persist.run_open:  # it ended without a RunEnd
                    try:
                        await shielded(self._end_unfinished(persist))
                    except Exception:
                        # What stopped the run is already on its way and says more than
                        # this failure to record it.
                        logger.warning("could not record the end of run %s", run_id,
                                       exc_info=True)

    async def aclose(self) -> None:
        """Close the sessions of this agent's MCP servers (a later run reopens them)."""
        for server in self.mcp_servers:
            await server.close()

    # -- internals -----------------------------------------------------------------------

    def _loop_config(self, resume: Resume | None) -> LoopConfig:
        persist = self._persist
        return LoopConfig(
            model=self._model,
            tools=self.tools,
            build_context=self._context.build,
            continuation=self.agent_type.continuation(),
            hooks=self.hooks,
            checkpoint=self._checkpoint if persist is not None else None,
            prepare_step=self._prepare_step if persist is not None else None,
            record_end=self._record_end if persist is not None else None,
            max_steps=self.max_steps,
            error_threshold=self.error_threshold,
            timeout=self.timeout,
            retry=self.retry,
            max_tokens=self.max_tokens,
            parallel_tool_calls=self.parallel_tool_calls,
            model_settings=self.model_settings,
            rules=self._rules_solver(resume),
            context=self._context_manager(),
            steering=self._steering,
            resume=resume,
            agent=self,
        )

    def _record(self) -> AgentRecord:
        from .store.records import AgentRecord

        return AgentRecord(
            name=self.name, id=self.id, agent_type=self.agent_type.name, system=self.system,
            model=self._model.name,
            llm_config={"model": self._model.name, "context_window": self.context_window,
                        "context_window_override": self._context_window,
                        "max_tokens": self.max_tokens,
                        "parallel_tool_calls": self.parallel_tool_calls,
                        "model_settings": settings_dict(self.model_settings)},
            tool_rules=[rule.model_dump(mode="json") for rule in self.tool_rules],
            tool_names=list(self.tools), tags=self.tags, enable_sleeptime=bool(self.sleeptime),
            message_buffer_autoclear=self.agent_type.clear_after_run, timezone=self.timezone)
