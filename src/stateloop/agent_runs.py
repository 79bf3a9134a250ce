"""One thread of an agent, as its users see it: ``run``, ``stream``, ``run_sync``, the
queue of runs and the ``LoopConfig`` each is given; the model a thread runs with and its
transcript; and the rest of its public methods, each delegating to the thread's state
(``thread_state.ThreadState``) and collaborators: ``memory`` (``agent_memory``),
``storage`` (``agent_store``), ``turn`` and the functions of ``agent_state``, ``control``
(``agent_control``), and ``agent_threads`` for what spans all the agent's threads.

``AgentRuns`` is what an agent's default thread (``Agent``) and each of its other threads
(``Conversation``) share; it knows neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from . import agent_options as options
from . import agent_state, agent_threads, tracing
from .agent_control import ThreadControl
from .agent_memory import ThreadMemory, output_reserve, rules_solver
from .agent_options import Input
from .agent_settings import AgentSettings, setting
from .agent_state import ThreadTurn
from .agent_store import ThreadStorage
from .approvals import Approval
from .cancellation import CancelScope
from .eager import shielded
from .errors import ConfigError
from .events import AnyEvent, RunEnd
from .loop import LoopConfig, Resume, run_loop
from .memory.context import ContextBuilder
from .memory.skills import ClientSkill, with_client_skills
from .messages import Message, new_id
from .run_result import Running, RunResult
from .steering import Delivery, SteeringQueue, SteerMode
from .surrogates import check
from .thread_state import ThreadState
from .tools import Tool

if TYPE_CHECKING:
    from .agent import Agent
    from .agent_types import AgentType
    from .approvals import PendingApproval
    from .events import Compaction
    from .hooks import Hooks, StepRecord
    from .llm.base import Model, ModelSettings
    from .llm.retry import RetryPolicy
    from .memory.blocks import Block
    from .memory.compaction import Strategy
    from .memory.embedding_models import Embedders
    from .memory.window import ContextWindowOverview
    from .sleeptime import Sleeptime
    from .store.sql import SqlStore
    from .tools.rules import BaseToolRule

logger = logging.getLogger("stateloop")


class AgentRuns:
    """One thread: ``run``, ``stream`` and ``run_sync``, queued in arrival order; steering,
    cancel, approvals; its state outside a run (reset, save, export, compact)."""

    settings: AgentSettings  # the agent's, shared by all its threads (agent_settings.py)

    # Who the agent is, and what it keeps across runs: the thread's own or the agent's.
    blocks: list[Block]
    directories: str = ""  # open files and their folders (memory/directories.py)
    recall_count: int
    archival_count: int
    sleeptime: Sleeptime | None
    conversation_id: str | None = None  # None: the agent's default thread

    # The agent's settings, read (and on ``Agent`` set) as attributes.
    id: setting[str] = setting()
    name: setting[str] = setting()
    agent_type: setting[AgentType] = setting()
    system: setting[str] = setting()
    tools: setting[dict[str, Tool]] = setting()
    tool_rules: setting[list[BaseToolRule]] = setting()
    max_steps: setting[int] = setting()
    error_threshold: setting[int | None] = setting()
    timeout: setting[float | None] = setting()
    max_tokens: setting[int | None] = setting()
    parallel_tool_calls: setting[bool] = setting()
    model_settings: setting[ModelSettings] = setting()
    output_type: setting[Any] = setting()
    output_retries: setting[int] = setting()
    hooks: setting[Hooks | None] = setting()
    retry: setting[RetryPolicy] = setting()
    approval_timeout: setting[float | None] = setting()
    busy: setting[Literal["queue", "reject"]] = setting()
    compaction: setting[Strategy | None] = setting()
    compaction_threshold: setting[float] = setting()
    summarizer: setting[Model | None] = setting()
    tags: setting[list[str]] = setting()
    timezone: setting[str] = setting()
    embedders: setting[Embedders | None] = setting()

    def _init_thread(self, delivery: Delivery) -> None:
        """The state of one thread, empty, and its collaborators: its system prompt compiled
        from the blocks."""
        state = self.state = ThreadState(transcript=[], steering=SteeringQueue(delivery),
                                         context=ContextBuilder(self.context_window))
        self.memory = self._memory(state)
        self.storage = self._storage(state)
        self.turn = ThreadTurn(self, state)
        self.control = ThreadControl(self, state, self.storage, self.run)
        state.transcript.append(self.memory.compile())

    @property
    def agent(self) -> Agent:
        """The agent whose thread this is (for ``Agent``, itself)."""
        raise NotImplementedError

    def _memory(self, state: ThreadState) -> ThreadMemory:
        return ThreadMemory(self, state)

    def _storage(self, state: ThreadState) -> ThreadStorage:
        return ThreadStorage(self, state, self.memory)

    # -- configuration -------------------------------------------------------------------

    @property
    def model(self) -> Model:
        """The model this thread's runs call."""
        return self.settings.model

    @model.setter
    def model(self, model: str | Model) -> None:
        self.settings.model = self.settings.resolve(model)

    @property
    def context_window(self) -> int:
        return self.settings.window(self.model)

    @context_window.setter
    def context_window(self, window: int | None) -> None:
        """A limit of the agent's own (None: the model's window)."""
        self.settings.context_window = window

    @property
    def output_reserve(self) -> int:
        """Tokens of the window kept free for the answer: ``max_tokens`` up to half the
        window, else the model's output limit up to an eighth of it (a 3,000-token window
        keeps 375, not 4,096)."""
        return output_reserve(self.context_window, self.max_tokens, self.model)

    def check_window(self, window: int | None = None) -> None:
        """Refuse a context window (the agent's, or ``window``) that cannot hold the system
        prompt, the tool definitions and the answer's reserve (``SystemPromptTooLarge``,
        naming the three)."""
        self.memory.check_window(window)

    async def recompile(self, *, dry_run: bool = False) -> str:
        """The system prompt compiled now, from the instructions, the tool rules and the blocks
        as the store holds them (edits made through it are read first); unless ``dry_run`` it
        becomes the agent's first message, stored with the next step or ``save()``."""
        return await self.memory.recompile(dry_run=dry_run)

    def recall_messages(self) -> list[Message]:
        """Every message of an agent without a store: evicted ones, then those in context."""
        return self.memory.recall_messages()

    def context_overview(self) -> ContextWindowOverview:
        """How the context window is used, as Letta reports it."""
        return self.memory.overview()

    def context_view(self) -> str:
        """The assembled context, message by message with token counts (for debugging)."""
        return self.memory.view()

    @property
    def pending_approval(self) -> PendingApproval | None:
        """The step paused for approval of some of its tool calls (``run(approvals=...)``)."""
        return self.state.pending_approval

    @pending_approval.setter
    def pending_approval(self, pending: PendingApproval | None) -> None:
        self.state.pending_approval = pending

    @property
    def last_result(self) -> RunResult | None:
        """How the last run of this thread ended."""
        return self.state.last_result

    @property
    def messages(self) -> list[Message]:
        """The in-context transcript, system prompt first."""
        return list(self.state.transcript)

    @property
    def store(self) -> SqlStore | None:
        return self.state.persist.store if self.state.persist is not None else None

    @property
    def running(self) -> bool:
        """Whether a run of this thread is in flight."""
        return self.state.running

    @property
    def idle(self) -> bool:
        """Whether the agent can be let go and read from the store again losing nothing: in
        none of its threads a run in flight or queued, steering, a background run or
        anything unwritten, and no memory run in flight."""
        agent = self.agent
        return agent_threads.idle(agent.threads, agent.sleeptime, agent.approval_timeout)

    def memory_changed(self, block: Block | None = None) -> None:
        """A block changed: recompile the system prompt now, so the next step sees it (in
        every thread of the agent that shares it). A value holding a lone surrogate is
        refused (``ValueError``)."""
        agent_threads.memory_changed(self.memory, self.agent.threads, block)

    # -- state outside a run -------------------------------------------------------------

    def reset(self) -> None:
        """Forget the conversation (the system prompt and memory blocks stay)."""
        agent_state.reset(self.state, self.memory, self.name)

    async def save(self) -> None:
        """Write what changed outside a run (a reset, a cancelled approval) to the store now;
        otherwise it is written with the next step."""
        await agent_state.save(self.state, self.storage, self.model.name)

    def replace_message(self, message: Message) -> bool:
        """Put an edited message in place of the in-context one with its id (the caller
        stores it); the next request sends it. False when no message in context has it."""
        return agent_state.replace_message(self.state, message, self.context_window,
                                           self.name)

    def export_state(self) -> dict[str, Any]:
        """The conversation as JSON-able data: transcript and any pending approval."""
        return agent_state.export_state(self.state, self.blocks)

    def import_state(self, state: dict[str, Any]) -> None:
        """Continue from ``export_state()``'s data, e.g. in another process."""
        agent_state.refuse_running(self.state, self.name, "cannot import state")
        messages, blocks, pending = agent_state.read_exported(state)
        self.blocks = blocks
        agent_state.use_exported(self.state, self.memory, messages, pending)

    async def compact(self, *, everything: bool = False) -> Compaction | None:
        """Compact now (waiting for a run in flight): the oldest turns, or with
        ``everything`` all of them, leave for a summary; None when nothing can be evicted."""
        return await agent_state.compact(self.state, self.memory, self.storage, self.turn,
                                         self.model.name, everything=everything)

    # -- control of a run ----------------------------------------------------------------

    def steer(self, text: str | Message, mode: SteerMode = "after_batch"
              ) -> asyncio.Task[RunResult] | None:
        """Deliver input to the run in flight before its next model call.

        ``mode="interrupt"`` skips the calls of the current batch that have not started.
        An idle agent starts a run (returned as a task).
        """
        return self.control.steer(text, mode)

    def follow_up(self, text: str | Message) -> asyncio.Task[RunResult] | None:
        """Queue input for when the run in flight would otherwise stop (idle: start a run)."""
        return self.control.follow_up(text)

    def cancel(self) -> None:
        """Stop the run in flight with stop reason ``cancelled``, or deny a pending approval.

        Safe to call from any thread while a run is in flight.
        """
        self.control.cancel()

    # -- running -------------------------------------------------------------------------

    async def run(self, input: Input = None, *,
                  approvals: Sequence[Approval] | None = None, max_steps: int | None = None,
                  model: str | Model | None = None, tools: Sequence[Tool] = (),
                  skills: Sequence[ClientSkill] = (), output_type: Any = None) -> RunResult:
        """Run until the agent stops; returns the result (never raises for model/tool failure).

        ``approvals`` resumes a run paused with stop reason ``requires_approval``;
        ``max_steps`` and ``model`` replace the agent's own for this run only; ``tools`` are
        offered for this run only, over the agent's own of the same name; ``skills`` (a
        client's) are listed in its prompt's available skills for this run only; ``output_type``
        makes ``result.output`` a validated answer. Input that
        can never fit the context window raises ``InputTooLarge`` before anything is stored.
        """
        async with self._running(input, approvals, max_steps, model, tools, output_type,
                                 events=False, skills=skills) as running:
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
            return asyncio.run(self._settled(
                self.run(input, approvals=approvals, output_type=output_type)))
        raise RuntimeError("run_sync() cannot be called from a running event loop; "
                           "use 'await agent.run(...)' instead")

    async def stream(self, input: Input = None, *, approvals: Sequence[Approval] | None = None,
                     max_steps: int | None = None, model: str | Model | None = None,
                     tools: Sequence[Tool] = (), output_type: Any = None,
                     skills: Sequence[ClientSkill] = ()) -> AsyncIterator[AnyEvent]:
        """Run and yield every event; runs of one agent are queued in arrival order.
        The other arguments are as for ``run`` (a typed answer is ``RunEnd.data``)."""
        async with self._running(input, approvals, max_steps, model, tools, output_type,
                                 skills=skills) as running:
            async for event in running.events:
                yield event

    async def _settled(self, run: Awaitable[RunResult]) -> RunResult:
        """``run``, then the memory run it started (``run_sync``: its event loop ends next)."""
        result = await run
        if self.sleeptime is not None:
            await self.sleeptime.wait()
        return result

    async def _before_run(self) -> None:
        """What the agent does before a run of any of its threads (``Agent`` lists the tools
        of its MCP servers)."""

    @contextlib.asynccontextmanager
    async def _running(self, input: Input, approvals: Sequence[Approval] | None,
                       max_steps: int | None, model: str | Model | None,
                       tools: Sequence[Tool] = (), output_type: Any = None, *,
                       events: bool = True, skills: Sequence[ClientSkill] = ()
                       ) -> AsyncIterator[Running]:
        """A run whose turn has come: its events (with ``events=False``, only its start and
        end), then how it ended, recorded on exit."""
        new_input = options.as_messages(input)
        await self.agent._before_run()  # may raise (MCP servers) before anything is stored
        for index, message in enumerate(new_input):
            check(message.text, f"input message {index}: text")
        run_model = self.settings.resolve(model) if model is not None else None
        options.check_fits(new_input, system=self.state.transcript[0],
                           tools=self.memory.tool_specs(),
                           window=self.context_window, reserve=self.output_reserve,
                           model=(run_model or self.model).name)
        if max_steps is not None and (type(max_steps) is not int or max_steps < 1):
            raise ConfigError(f"max_steps must be a positive integer, not {max_steps!r}")
        typed = options.typed_output(output_type or self.output_type, self.output_retries)
        async with self.turn.hold():  # runs of one thread queue here, across processes too
            if self.state.stale:
                await self.storage.reload()  # raises while the store cannot be read
            resume = self.control.take_pending(new_input, list(approvals or ()))
            if isinstance(resume, RunEnd):  # these approvals were already applied
                yield Running.ended(resume)
                return
            self.memory.refresh()
            persist = self.state.persist
            run_id = persist.start_run() if persist is not None else new_id("run")
            scope = self.state.scope = CancelScope()
            running: Running | None = None
            abandoned: Callable[[], None] | None = None
            try:
                config = self.loop_config(resume)
                if max_steps is not None:
                    config.max_steps = max_steps
                if run_model is not None:
                    config.model = run_model
                if tools:
                    config.tools = {**self.tools, **{tool.name: tool for tool in tools}}
                if skills:
                    config.build_context = with_client_skills(
                        config.build_context, lambda: self.blocks, skills)
                config.events = events

                def ended(end: RunEnd) -> None:
                    assert running is not None
                    running.end = end
                    self.control.after_run(end, resume)

                config.on_end = ended
                if typed is not None:
                    typed.apply(config)
                abandoned = tracing.watch(config, run_id, self.id, self.turn.waited)
                running = Running(run_loop(self.state.transcript, new_input, config, run_id=run_id,
                                            agent_id=self.id, cancel=scope))
                yield running
            finally:
                self.state.scope = None
                if abandoned is not None and (running is None or running.end is None):
                    abandoned()  # its watchers see it end (its trace, the server's metrics)
                if persist is not None and persist.run_open:  # it ended without a RunEnd
                    try:
                        await shielded(self.storage.end_unfinished(persist))
                    except Exception:
                        # What stopped the run is already on its way and says more than
                        # this failure to record it.
                        logger.warning("could not record the end of run %s", run_id,
                                       exc_info=True)

    # -- internals -----------------------------------------------------------------------

    def loop_config(self, resume: Resume | None = None) -> LoopConfig:
        """What a run of this thread is handed now (``loop.LoopConfig``: its model, tools,
        rules, hooks, limits, context and store callbacks), ``resume`` going on from a
        paused step. Building one changes nothing: a run adjusts its own copy, and a
        preview of the next request (the server's) is built from one."""
        persist = self.state.persist
        return LoopConfig(
            model=self.model,
            tools=self.tools,
            build_context=self.state.context.build,
            continuation=self.agent_type.continuation(),
            hooks=self.hooks,
            checkpoint=self._checkpoint if persist is not None else None,
            prepare_step=self.memory.prepare_step if persist is not None else None,
            record_end=self.storage.record_end if persist is not None else None,
            max_steps=self.max_steps,
            error_threshold=self.error_threshold,
            timeout=self.timeout,
            retry=self.retry,
            max_tokens=self.max_tokens,
            parallel_tool_calls=self.parallel_tool_calls,
            model_settings=self.model_settings,
            rules=rules_solver(self.tool_rules, resume),
            context=self.memory.context_manager(),
            steering=self.state.steering,
            resume=resume,
            agent=self,
        )

    def _checkpoint(self, record: StepRecord) -> None:
        agent_state.checkpoint(self.state, record, self.model.name)
