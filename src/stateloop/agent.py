"""``Agent``: the public face of stateloop — a model, tools and memory, run by the loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .agent_types import agent_type as lookup_agent_type
from .errors import AgentBusyError, ConfigError
from .events import Event, RunEnd, StopReason
from .hooks import Hooks
from .llm.base import Model
from .llm.registry import resolve_model
from .llm.retry import RetryPolicy
from .loop import CancelScope, LoopConfig, run_loop
from .memory.blocks import Block, render_blocks
from .memory.context import ContextBuilder
from .messages import Message, ToolCall, Usage, new_id, system, user
from .tools import Tool
from .tools.builtin import BUILTIN_TOOLS

Input = str | Message | Sequence[str | Message] | None


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
        return cls(end.output, end.stop_reason, end.steps, end.usage, end.messages, end.run_id,
                   end.error)


class Agent:
    """An agent: a model, tools, a system prompt and core memory blocks, with a conversation.

    ``await agent.run("...")`` (or ``run_sync``) runs it to a stop; ``agent.stream("...")``
    yields every event. A second run continues the same conversation.
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
        hooks: Hooks | None = None,
        retry: RetryPolicy | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        _require_positive("max_steps", max_steps)
        if error_threshold is not None:
            _require_positive("error_threshold", error_threshold)
        if timeout is not None and timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.id = new_id("agent")
        self.name = name or self.id
        self.agent_type = lookup_agent_type(agent_type)
        self._model_options = {k: v for k, v in (("base_url", base_url), ("api_key", api_key))
                               if v is not None}
        self.model = model  # the setter resolves strings
        self.system = system
        self.blocks = list(blocks)
        _check_unique_labels(self.blocks)
        self.tools = _tool_map([*self.agent_type.default_tools, *tools])
        self.max_steps = max_steps
        self.error_threshold = error_threshold
        self.timeout = timeout
        self._context_window = context_window
        self.max_tokens = max_tokens
        self.parallel_tool_calls = parallel_tool_calls
        self.hooks = hooks
        self.retry = retry or RetryPolicy()
        self._transcript: list[Message] = [self._compile_system()]
        self._context = ContextBuilder(self.context_window)
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._scope: CancelScope | None = None
        self.last_result: RunResult | None = None

    # -- configuration -------------------------------------------------------------------

    @property
    def model(self) -> Model:
        return self._model

    @model.setter
    def model(self, model: str | Model) -> None:
        self._model = resolve_model(model, **self._model_options)

    @property
    def context_window(self) -> int:
        return self._context_window or self._model.context_window

    @property
    def messages(self) -> list[Message]:
        """The in-context transcript, system prompt first."""
        return list(self._transcript)

    @property
    def running(self) -> bool:
        return self._scope is not None

    # -- running -------------------------------------------------------------------------

    async def run(self, input: Input = None) -> RunResult:
        """Run until the agent stops; returns the result (never raises for model/tool failure)."""
        end: RunEnd | None = None
        async for event in self.stream(input):
            if type(event) is RunEnd:
                end = event
        assert end is not None
        return RunResult.from_event(end)

    def run_sync(self, input: Input = None) -> RunResult:
        """``run`` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(input))
        raise RuntimeError("run_sync() cannot be called from a running event loop; "
                           "use 'await agent.run(...)' instead")

    async def stream(self, input: Input = None) -> AsyncIterator[Event]:
        """Run and yield every event; runs of one agent are queued in arrival order."""
        new_input = _as_messages(input)
        async with self._run_lock():
            self._refresh_system()
            scope = self._scope = CancelScope()
            try:
                async for event in run_loop(self._transcript, new_input, self._loop_config(),
                                            run_id=new_id("run"), agent_id=self.id,
                                            cancel=scope):
                    if type(event) is RunEnd:
                        self.last_result = RunResult.from_event(event)
                    yield event
            finally:
                self._scope = None

    def cancel(self) -> None:
        """Stop the run in flight (if any) with stop reason ``cancelled``; any thread may call."""
        scope = self._scope
        if scope is not None:
            scope.cancel()

    def reset(self) -> None:
        """Forget the conversation (the system prompt and memory blocks stay)."""
        if self.running:
            raise AgentBusyError(f"agent {self.name!r} is running; cancel it before reset()")
        self._transcript[:] = [self._compile_system()]

    # -- internals -----------------------------------------------------------------------

    def _loop_config(self) -> LoopConfig:
        return LoopConfig(
            model=self._model,
            tools=self.tools,
            build_context=self._context.build,
            continuation=self.agent_type.continuation(),
            hooks=self.hooks,
            max_steps=self.max_steps,
            error_threshold=self.error_threshold,
            timeout=self.timeout,
            retry=self.retry,
            max_tokens=self.max_tokens,
            parallel_tool_calls=self.parallel_tool_calls,
            agent=self,
        )

    def _compile_system(self) -> Message:
        memory = render_blocks(self.blocks)
        return system(f"{self.system}\n\n{memory}" if memory and self.system else
                      self.system or memory)

    def _refresh_system(self) -> None:
        """Recompile the system prompt only when what it renders has changed."""
        compiled = self._compile_system()
        if compiled.text != self._transcript[0].text:
            self._transcript[0] = compiled

    def _run_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        return self._lock[1]


def _as_messages(input: Input) -> list[Message]:
    if input is None:
        return []
    if isinstance(input, str | Message):
        input = [input]
    messages = []
    for item in input:
        if isinstance(item, str):
            messages.append(user(item))
        elif isinstance(item, Message):
            messages.append(item)
        else:
            raise TypeError(f"input must be a string, a Message or a list of them, "
                            f"not {type(item).__name__}")
    return messages


def _tool_map(items: Iterable[Tool | Callable[..., Any] | str]) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    for item in items:
        if isinstance(item, str):
            if item not in BUILTIN_TOOLS:
                raise ConfigError(f"unknown built-in tool {item!r}; built-in tools are "
                                  f"{', '.join(sorted(BUILTIN_TOOLS))}")
            found = BUILTIN_TOOLS[item]
        elif isinstance(item, Tool):
            found = item
        elif callable(item):
            found = Tool.from_function(item)
        else:
            raise ConfigError(f"tools must be Tool objects, functions or built-in tool names, "
                              f"not {type(item).__name__}")
        if found.name in tools and tools[found.name] is not found:
            raise ConfigError(f"two different tools are named {found.name!r}")
        tools[found.name] = found
    return tools


def _check_unique_labels(blocks: list[Block]) -> None:
    labels = [b.label for b in blocks]
    for label in labels:
        if labels.count(label) > 1:
            raise ConfigError(f"two memory blocks are labelled {label!r}")


def _require_positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
