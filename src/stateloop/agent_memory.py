"""A thread's memory: the system prompt it compiles from the agent's settings and blocks,
the context window it keeps (size, compaction, overview), and its blocks kept in step with
the store.

``ThreadMemory`` is held by each thread (``thread.memory``). It reads the settings named by
``MemorySettings`` and writes only the thread's ``ThreadState`` (its transcript's first
message, what that was compiled from, compaction and evicted messages)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

from .llm.tokens import message_tokens
from .memory.blocks import Block, render_memory_metadata
from .memory.compaction import ContextManager, SystemPromptTooLarge, is_summary, tool_tokens
from .memory.git_blocks import GIT_MEMORY_TAG, render_core_memory
from .memory.window import context_rows, format_context, overview
from .messages import Message, system
from .surrogates import check

if TYPE_CHECKING:
    from .agent_types import AgentType
    from .llm.base import Model, ToolSpec
    from .loop import Resume
    from .memory.compaction import Strategy
    from .memory.window import ContextWindowOverview
    from .thread_state import ThreadState
    from .tools import Tool
    from .tools.rules import BaseToolRule, ToolRulesSolver


class MemorySettings(Protocol):
    """What a thread's memory reads of its thread: the agent's settings, as that thread
    sees them (a conversation's isolated blocks and own model in place of the agent's)."""

    @property
    def id(self) -> str: ...
    @property
    def conversation_id(self) -> str | None: ...
    @property
    def system(self) -> str: ...
    @property
    def blocks(self) -> list[Block]: ...
    @property
    def directories(self) -> str: ...
    @property
    def tags(self) -> list[str]: ...
    @property
    def timezone(self) -> str: ...
    @property
    def tools(self) -> dict[str, Tool]: ...
    @property
    def tool_rules(self) -> list[BaseToolRule]: ...
    @property
    def agent_type(self) -> AgentType: ...
    @property
    def model(self) -> Model: ...
    @property
    def context_window(self) -> int: ...
    @property
    def max_tokens(self) -> int | None: ...
    @property
    def compaction(self) -> Strategy | None: ...
    @property
    def compaction_threshold(self) -> float: ...
    @property
    def summarizer(self) -> Model | None: ...
    @property
    def recall_count(self) -> int: ...
    @property
    def archival_count(self) -> int: ...


def output_reserve(window: int, max_tokens: int | None, model: Model) -> int:
    """Tokens of the window kept free for the answer: ``max_tokens`` up to half the window,
    else the model's output limit up to an eighth of it (a 3,000-token window keeps 375, not
    4,096)."""
    if max_tokens:
        return min(max_tokens, window // 2)
    return min(model.max_output_tokens or 4096, window // 8)


def rules_solver(rules: list[BaseToolRule], resume: Resume | None) -> ToolRulesSolver | None:
    """The solver of a run's tool rules (None: no rules), from a resumed step's state."""
    if not rules:
        return None
    from .tools.rules import ToolRulesSolver  # lazy: builds pydantic models

    if resume is not None and resume.pending.rules_state is not None:
        return ToolRulesSolver.from_state(rules, resume.pending.rules_state)
    return ToolRulesSolver(rules)


class ThreadMemory:
    """System prompt compilation, compaction, context overview, and blocks kept in step with
    the store, for one thread."""

    def __init__(self, settings: MemorySettings, state: ThreadState) -> None:
        self.settings = settings
        self.state = state

    def reserve(self, window: int | None = None) -> int:
        """The answer's reserve in ``window`` (the thread's by default)."""
        s = self.settings
        return output_reserve(window or s.context_window, s.max_tokens, s.model)

    def check_window(self, window: int | None = None) -> None:
        """Refuse a context window (the thread's, or ``window``) that cannot hold the system
        prompt, the tool definitions and the answer's reserve (``SystemPromptTooLarge``,
        naming the three)."""
        window = window or self.settings.context_window
        model = self.settings.model.name
        fixed = message_tokens(self.state.transcript[0], model) + tool_tokens(self.tool_specs(),
                                                                              model)
        reserve = self.reserve(window)
        if fixed + reserve > window:
            raise SystemPromptTooLarge(
                f"context_window of {window:,} tokens cannot hold the system prompt and tool "
                f"definitions ({fixed:,} tokens) and the answer's reserve ({reserve:,})")

    def block_changed(self, block: Block | None) -> None:
        """A block changed: refuse a lone surrogate, queue its value to be written, and
        recompile the system prompt."""
        if block is not None:
            check(block.value, f"block {block.label!r}: value")
        if block is not None and self.state.persist is not None:
            self.state.persist.dirty_blocks[block.id] = block.value
        self.refresh()

    async def recompile(self, *, dry_run: bool = False) -> str:
        """The system prompt compiled now from what the store holds; unless ``dry_run`` it
        becomes the transcript's first message."""
        if self.state.persist is not None:
            await self.state.persist.flush()
            await self.sync_blocks()
        if dry_run:
            compiled = self.state.compiled
            text = self.compile().text
            self.state.compiled = compiled
            return text
        self.state.compiled = None  # compile even when the key matches: the store may be behind
        self.refresh()
        return self.state.transcript[0].text

    def recall_messages(self) -> list[Message]:
        """Every message of a thread without a store: evicted ones, then those in context."""
        return [*self.state.evicted,
                *(m for m in self.state.transcript[1:] if not is_summary(m))]

    def overview(self) -> ContextWindowOverview:
        """How the context window is used, as Letta reports it."""
        s = self.settings
        solver = rules_solver(s.tool_rules, None)
        return overview(
            window=s.context_window, transcript=self.state.transcript, tools=self.tool_specs(),
            instructions=s.system,
            core_memory="\n\n".join(p for p in (render_core_memory(s.blocks, s.tags), s.directories)
                                      if p),
            memory_metadata=self.metadata()
            if s.blocks or self.state.persist is not None else "",
            rules=solver.render_prompt() if solver is not None else "",
            recall_count=s.recall_count, archival_count=s.archival_count, model=s.model.name)

    def view(self) -> str:
        """The assembled context, message by message with token counts (for debugging)."""
        return format_context(context_rows(self.state.transcript, self.settings.model.name),
                              self.settings.context_window)

    def tool_specs(self) -> list[ToolSpec]:
        """The tool definitions the model is sent, as the agent type offers them."""
        return self.settings.agent_type.continuation().tool_specs(
            [t.spec() for t in self.settings.tools.values()])

    # -- compaction ----------------------------------------------------------------------

    def context_manager(self) -> ContextManager | None:
        """The thread's compaction (None: the agent compacts nothing), remade when the
        window changed."""
        strategy = self.settings.compaction
        if strategy is None:
            return None
        window = self.state.window
        if window is None or window.window != self.settings.context_window:
            window = self.state.window = self.new_context_manager(strategy)
        return window

    def new_context_manager(self, strategy: Strategy) -> ContextManager:
        s = self.settings
        return ContextManager(window=s.context_window, reserve=self.reserve(),
                              strategy=strategy, model=lambda: s.summarizer or s.model,
                              threshold=s.compaction_threshold, on_evict=self._evict)

    def _evict(self, messages: list[Message]) -> None:
        if self.state.persist is None:
            self.state.evicted.extend(messages)  # the store keeps them otherwise
        self.state.compiled = None  # the memory metadata counts them: recompile
        self.refresh()

    # -- the store -----------------------------------------------------------------------

    def prepare_step(self) -> Awaitable[None] | None:
        """Before a step: earlier steps are committed (a crash may lose the step in flight,
        not earlier) and shared blocks brought up to date; something to await only when that
        needs the database."""
        persist = self.state.persist
        assert persist is not None
        if not persist.committed():
            return self._flush_and_sync_blocks()
        return self.sync_blocks() if persist.blocks_may_have_changed() else None

    async def _flush_and_sync_blocks(self) -> None:
        persist = self.state.persist
        assert persist is not None
        await persist.flush()
        if persist.blocks_may_have_changed():
            await self.sync_blocks()

    async def sync_blocks(self) -> None:
        """Bring the blocks up to date with the store, and the system prompt with them."""
        assert self.state.persist is not None
        await self.state.persist.sync_blocks(self.settings.blocks)
        # Another thread of this agent may have brought the shared blocks up to date already.
        self.refresh()

    # -- the system prompt ---------------------------------------------------------------

    def compile_key(self) -> tuple[Any, ...]:
        """What the system prompt renders: it is compiled again when this changes."""
        s = self.settings
        return (s.system, [(b.label, b.value, b.description, b.limit, b.read_only)
                           for b in s.blocks], [r.model_dump() for r in s.tool_rules],
                s.directories, GIT_MEMORY_TAG in s.tags)

    def compile(self) -> Message:
        """The system message compiled now (and its key noted as compiled)."""
        s = self.settings
        self.state.compiled = self.compile_key()
        solver = rules_solver(s.tool_rules, None)
        sections = [s.system, render_core_memory(s.blocks, s.tags), s.directories]
        if s.blocks or self.state.persist is not None:
            sections.append(self.metadata())
        sections.append(solver.render_prompt() if solver is not None else "")
        return system("\n\n".join(section for section in sections if section))

    def metadata(self) -> str:
        s = self.settings
        return render_memory_metadata(s.recall_count, s.archival_count, agent_id=s.id,
                                      conversation_id=s.conversation_id, timezone=s.timezone)

    def refresh(self) -> None:
        """Recompile the system prompt only when what it renders has changed."""
        if self.compile_key() == self.state.compiled:
            return
        compiled = self.compile()
        # The same message with the new text, as Letta rebuilds it: one system message in the
        # history however often memory changes.
        first = self.state.transcript[0]
        compiled.id, compiled.created_at = first.id, first.created_at
        self.state.transcript[0] = compiled
        if self.state.persist is not None:
            self.state.persist.system_changed(compiled)
