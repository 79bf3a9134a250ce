"""``Agent``: the public face of stateloop — a model, tools and memory, run by the loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from . import agent_options as options
from .agent_options import Input
from .agent_store import AgentStore
from .agent_types import agent_type as lookup_agent_type
from .approvals import Approval, ApprovalError, PendingApproval, denial_text
from .cancellation import CancelScope
from .eager import shielded
from .errors import AgentBusyError, CheckpointError, ConfigError
from .events import AnyEvent, Compaction, RunEnd, StopReason
from .hooks import Hooks, StepRecord
from .llm.base import Model
from .llm.registry import resolve_model
from .llm.retry import RetryPolicy
from .llm.tokens import message_tokens
from .loop import CANCELLED_NOTICE, LoopConfig, Resume, run_loop
from .memory.blocks import Block
from .memory.context import ContextBuilder
from .messages import Message, ToolCall, Usage, new_id, tool_result
from .persistence import Persistence, load_state, run_blocking
from .steering import Delivery, SteeringQueue, SteerMode
from .surrogates import check
from .tools import Tool

if TYPE_CHECKING:
    from .memory.archival import ArchivalMemory
    from .memory.compaction import ContextManager, Strategy
    from .memory.embeddings import Embedder
    from .store.records import AgentRecord
    from .store.sql import SqlStore
    from .tools.rules import BaseToolRule

logger = logging.getLogger("stateloop")

_creating_async: ContextVar[bool] = ContextVar("stateloop_creating_async", default=False)


@dataclass(slots=True)
class RunResult:
    """What a run produced and why it stopped."""

    output: str
    stop_reason: StopReason
    steps: int
    usage: Usage
    messages: list[Message]  # the messages this run added, input included
    run_id: str
    error: str | None = None
    pending_approvals: list[ToolCall] = field(default_factory=list)

    @classmethod
    def from_event(cls, end: RunEnd) -> RunResult:
        pending = end.pending_approval.requested_calls if end.pending_approval else []
        return cls(end.output, end.stop_reason, end.steps, end.usage, end.messages, end.run_id,
                   end.error, pending)


@dataclass(slots=True)
class _Running:
    """A run in flight, as ``Agent._running`` hands it out."""

    events: AsyncIterator[AnyEvent]
    end: RunEnd | None = None  # set as the loop yields it


async def _once(event: AnyEvent) -> AsyncIterator[AnyEvent]:
    yield event


class Agent(AgentStore):
    """An agent: a model, tools, a system prompt and core memory blocks, with a conversation.

    ``await agent.run("...")`` (or ``run_sync``) runs it to a stop; ``agent.stream("...")``
    yields every event. A second run continues the same conversation. With
    ``store="sqlite:///PATH"`` every step is persisted and ``Agent.load`` brings it back.
    """

    def __init__(
        self,
        model: str | Model,
        *,
        tools: Iterable[Tool | Callable[..., Any] | str] = (),
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
        embedder: Embedder | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        options.require_positive("max_steps", max_steps)
        if error_threshold is not None:
            options.require_positive("error_threshold", error_threshold)
        for label, seconds in (("timeout", timeout), ("approval_timeout", approval_timeout)):
            if seconds is not None and seconds <= 0:
                raise ConfigError(f"{label} must be a positive number of seconds, "
                                  f"got {seconds!r}")
        if busy not in ("queue", "reject"):
            raise ConfigError(f"busy must be 'queue' or 'reject', got {busy!r}")
        self.id = f"agent-{uuid.uuid4()}"
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
            if any(not block.read_only for block in self.blocks):
                defaults += self.agent_type.memory_tools
            if store is not None:
                defaults += self.agent_type.stored_memory_tools
        self.tools = options.tool_map([*defaults, *tools])
        self.max_steps = max_steps
        self.error_threshold = error_threshold
        self.timeout = timeout
        self._context_window = context_window
        self.max_tokens = max_tokens
        self.parallel_tool_calls = parallel_tool_calls
        self.hooks = hooks
        self.retry = retry or RetryPolicy()
        self.tool_rules = options.parse_rules(tool_rules)
        self.approval_timeout = approval_timeout
        self.busy = busy
        if compaction not in ("summarize", "sliding_window", None):
            raise ConfigError(f"compaction must be 'summarize', 'sliding_window' or None, "
                              f"got {compaction!r}")
        if not 0 < compaction_threshold <= 1:
            raise ConfigError(f"compaction_threshold must be in (0, 1], "
                              f"got {compaction_threshold!r}")
        self.compaction: Strategy | None = compaction
        self.compaction_threshold = compaction_threshold
        self.summarizer = (resolve_model(summarizer, **self._model_options)
                           if summarizer is not None else None)
        self.tags = list(tags)
        self.embedder = embedder
        self.pending_approval: PendingApproval | None = None
        self.last_result: RunResult | None = None
        self.recall_count = 0  # messages stored so far, in context or not
        self.archival_count = 0
        self._steering = SteeringQueue(steering_delivery)
        self._persist: Persistence | None = None
        self._compiled: tuple[Any, ...] | None = None
        self._transcript: list[Message] = [self._compile_system()]
        self._context = ContextBuilder(self.context_window)
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._scope: CancelScope | None = None
        self._resumed: OrderedDict[str, RunEnd] = OrderedDict()  # call id -> its resume's end
        self._background: set[asyncio.Task[Any]] = set()
        self._archival: ArchivalMemory | None = None
        self._evicted: list[Message] = []  # out of context, kept for recall (no store)
        self._window: ContextManager | None = None
        self._stale = False  # a write failed and what the store holds could not be read yet
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
        from .tools.builtin import builtin_names

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
                    context_window=record.llm_config.get("context_window_override"),
                    **settings)
        agent.id = record.id
        agent._persist = Persistence(db, record.id)
        await agent._use_stored(messages, pending)
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
    def running(self) -> bool:
        return self._scope is not None

    @property
    def store(self) -> SqlStore | None:
        return self._persist.store if self._persist is not None else None

    # -- running -------------------------------------------------------------------------

    async def run(self, input: Input = None, *,
                  approvals: Sequence[Approval] | None = None, max_steps: int | None = None,
                  model: str | Model | None = None) -> RunResult:
        """Run until the agent stops; returns the result (never raises for model/tool failure).

        ``approvals`` resumes a run paused with stop reason ``requires_approval``;
        ``max_steps`` and ``model`` replace the agent's own for this run only.
        """
        async with self._running(input, approvals, max_steps, model, events=False) as running:
            async for _ in running.events:  # straight from the loop: no generator between
                pass
        assert running.end is not None
        return RunResult.from_event(running.end)

    def run_sync(self, input: Input = None, *,
                 approvals: Sequence[Approval] | None = None) -> RunResult:
        """``run`` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(input, approvals=approvals))
        raise RuntimeError("run_sync() cannot be called from a running event loop; "
                           "use 'await agent.run(...)' instead")

    async def stream(self, input: Input = None, *,
                     approvals: Sequence[Approval] | None = None,
                     max_steps: int | None = None,
                     model: str | Model | None = None) -> AsyncIterator[AnyEvent]:
        """Run and yield every event; runs of one agent are queued in arrival order.
        ``max_steps`` and ``model`` replace the agent's own for this run only."""
        async with self._running(input, approvals, max_steps, model) as running:
            async for event in running.events:
                yield event

    @contextlib.asynccontextmanager
    async def _running(self, input: Input, approvals: Sequence[Approval] | None,
                       max_steps: int | None, model: str | Model | None, *,
                       events: bool = True) -> AsyncIterator[_Running]:
        """A run whose turn has come: its events (with ``events=False``, only its start and
        end), then how it ended, recorded on exit."""
        new_input = options.as_messages(input)
        for index, message in enumerate(new_input):
            check(message.text, f"input message {index}: text")
        if max_steps is not None and (type(max_steps) is not int or max_steps < 1):
            raise ConfigError(f"max_steps must be a positive integer, not {max_steps!r}")
        run_model = resolve_model(model, **self._model_options) if model is not None else None
        lock = self._run_lock()
        if self.busy == "reject" and lock.locked():
            raise AgentBusyError(f"agent {self.name!r} is already running; try again when "
                                 f"its run ends")
        async with lock:
            if self._stale:
                await self._reload()  # raises while the store cannot be read
            resume = self._take_pending(new_input, list(approvals or ()))
            if isinstance(resume, RunEnd):  # these approvals were already applied
                yield _Running(_once(resume), resume)
                return
            self._refresh_system()
            persist = self._persist
            run_id = persist.start_run() if persist is not None else new_id("run")
            scope = self._scope = CancelScope()
            running: _Running | None = None
            try:
                config = self._loop_config(resume)
                if max_steps is not None:
                    config.max_steps = max_steps
                if run_model is not None:
                    config.model = run_model
                config.events = events

                def ended(end: RunEnd) -> None:
                    assert running is not None
                    running.end = end
                    self._after_run(end, resume)

                config.on_end = ended
                running = _Running(run_loop(self._transcript, new_input, config, run_id=run_id,
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

    def steer(self, text: str | Message, mode: SteerMode = "after_batch"
              ) -> asyncio.Task[RunResult] | None:
        """Deliver input to the run in flight before its next model call.

        ``mode="interrupt"`` skips the calls of the current batch that have not started.
        An idle agent starts a run (returned as a task).
        """
        message = options.as_messages(text)[0]
        check(message.text, "steering text")
        if self.running:
            self._steering.steer(message, mode)
            return None
        return self._start_background(message)

    def follow_up(self, text: str | Message) -> asyncio.Task[RunResult] | None:
        """Queue input for when the run in flight would otherwise stop (idle: start a run)."""
        message = options.as_messages(text)[0]
        check(message.text, "follow-up text")
        if self.running:
            self._steering.follow_ups.append(message)
            return None
        return self._start_background(message)

    def cancel(self) -> None:
        """Stop the run in flight with stop reason ``cancelled``, or deny a pending approval.

        Safe to call from any thread while a run is in flight.
        """
        scope = self._scope
        if scope is not None:
            scope.cancel()
        elif self.pending_approval is not None:
            self._answer_pending("the run was cancelled")

    def reset(self) -> None:
        """Forget the conversation (the system prompt and memory blocks stay)."""
        if self.running:
            raise AgentBusyError(f"agent {self.name!r} is running; cancel it before reset()")
        self._compiled = None
        self._transcript[:] = [self._compile_system()]
        self.pending_approval = None
        if self._persist is not None:  # a stored pending approval is cleared with it
            self._persist.unsaved.append(self._transcript[0])

    async def save(self) -> None:
        """Write what changed outside a run (a reset, a cancelled approval) to the store now;
        otherwise it is written with the next step."""
        if self._persist is not None and not self.running:
            try:
                self._checkpoint(StepRecord("", 0, []))
            except CheckpointError:
                pass  # raised by the flush, which recovers first
            await self._flush()

    def export_state(self) -> dict[str, Any]:
        """The conversation as JSON-able data: transcript and any pending approval."""
        return {
            "messages": [m.to_dict() for m in self._transcript],
            "pending_approval": (self.pending_approval.to_dict()
                                 if self.pending_approval else None),
            "blocks": [{"label": b.label, "value": b.value, "description": b.description,
                        "limit": b.limit, "read_only": b.read_only, "id": b.id}
                       for b in self.blocks],
        }

    def import_state(self, state: dict[str, Any]) -> None:
        """Continue from ``export_state()``'s data, e.g. in another process."""
        if self.running:
            raise AgentBusyError(f"agent {self.name!r} is running; cannot import state")
        messages = [Message.from_dict(m) for m in state["messages"]]
        if not messages or messages[0].role != "system":
            raise ConfigError("state.messages must start with the system message")
        self.blocks = [Block(**b) for b in state.get("blocks", [])]
        pending = state.get("pending_approval")
        self.pending_approval = PendingApproval.from_dict(pending) if pending else None
        self._transcript[:] = messages
        self._compiled = self._compile_key()

    async def compact(self) -> Compaction | None:
        """Compact now (waiting for a run in flight); None when nothing can be evicted."""
        async with self._run_lock():
            manager = self._context_manager() or self._new_context_manager("sliding_window")
            result = await manager.compact(self._transcript, self._tool_specs())
            if result is None:
                return None
            if self._persist is not None:
                try:
                    self._checkpoint(StepRecord("", 0, [result.summary]))
                except CheckpointError:
                    pass  # raised by the flush, which recovers first
                await self._flush()
            return result.event

    # -- internals -----------------------------------------------------------------------

    def _take_pending(self, new_input: list[Message],
                      approvals: list[Approval]) -> Resume | RunEnd | None:
        """What the run must finish first: approvals applied to the pending step, a timed-out
        approval denied, or (for approvals already applied) the earlier result."""
        pending = self.pending_approval
        if pending is None:
            if not approvals:
                return None
            ends = [self._resumed.get(a.tool_call_id) for a in approvals]
            first = ends[0]
            if first is not None and all(end is first for end in ends):
                return first  # the same approvals again: nothing runs twice
            raise ApprovalError("no tool call is awaiting approval")
        if self.approval_timeout is not None and (
                time.time() - pending.created_at >= self.approval_timeout):
            reason = f"no approval within {self.approval_timeout:g} s"
            approvals = [Approval(i, approve=False, reason=reason) for i in pending.requested]
        elif not approvals:
            raise ApprovalError(
                f"agent {self.name!r} is waiting for approval of tool calls "
                f"{', '.join(pending.requested)}; send approvals=[...] or cancel()"
                + (" before sending a new message" if new_input else ""))
        decisions = pending.check(approvals)
        self.pending_approval = None
        return Resume(pending, decisions)

    def _after_run(self, end: RunEnd, resume: Resume | None) -> None:
        self.last_result = RunResult.from_event(end)
        self.pending_approval = end.pending_approval
        self.recall_count += len(end.messages)
        if (self.agent_type.clear_after_run and end.pending_approval is None
                and self._persist is None):  # else cleared as the run's end is stored
            self._transcript[1:] = []
        if resume is not None:
            for call_id in resume.decisions:
                self._resumed[call_id] = end
            while len(self._resumed) > 1000:
                self._resumed.popitem(last=False)
        if end.pending_approval is not None and self.approval_timeout is not None:
            asyncio.get_running_loop().call_later(self.approval_timeout, self._expire,
                                                  end.pending_approval)

    def _expire(self, pending: PendingApproval) -> None:
        if self.pending_approval is pending:
            self._start_background(None)  # the run denies the timed-out calls, then goes on

    def _answer_pending(self, reason: str) -> None:
        """Deny the pending calls (the others are cancelled) without running the model."""
        pending, self.pending_approval = self.pending_approval, None
        assert pending is not None
        for call in pending.calls:
            text = denial_text(reason) if call.id in pending.requested else CANCELLED_NOTICE
            self._append_outside_run(tool_result(call, text, is_error=True))

    def _start_background(self, message: Message | None) -> asyncio.Task[RunResult]:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("an idle agent starts a run here, which needs a running event "
                               "loop; use 'await agent.run(...)' or run_sync()") from None
        task = loop.create_task(self.run(message))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

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
            rules=self._rules_solver(resume),
            context=self._context_manager(),
            steering=self._steering,
            resume=resume,
            agent=self,
        )

    def _checkpoint(self, record: StepRecord) -> None:
        assert self._persist is not None
        self._persist.checkpoint(record, self._transcript, self._model.name)

    def _record(self) -> AgentRecord:
        from .store.records import AgentRecord

        return AgentRecord(
            name=self.name, id=self.id, agent_type=self.agent_type.name, system=self.system,
            model=self._model.name,
            llm_config={"model": self._model.name, "context_window": self.context_window,
                        "context_window_override": self._context_window,
                        "max_tokens": self.max_tokens},
            tool_rules=[rule.model_dump(mode="json") for rule in self.tool_rules],
            tool_names=list(self.tools), tags=self.tags,
            message_buffer_autoclear=self.agent_type.clear_after_run)

    def _run_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        return self._lock[1]
