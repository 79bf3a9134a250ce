"""The memory side of ``Agent``: the system prompt it compiles, the context window it keeps,
and the recall and archival stores its tools reach."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .agent_types import AgentType
from .errors import ConfigError
from .llm.base import Model, ToolSpec
from .llm.tokens import message_tokens
from .memory.blocks import Block, render_blocks, render_memory_metadata
from .memory.compaction import ContextManager, SystemPromptTooLarge, is_summary, tool_tokens
from .memory.embeddings import default_embedder
from .memory.window import context_rows, format_context, overview
from .messages import Message, system
from .surrogates import check

if TYPE_CHECKING:
    from .loop import Resume
    from .memory.archival import ArchivalMemory
    from .memory.compaction import ContextManager, Strategy
    from .memory.embedding_models import Embedders
    from .memory.embeddings import Embedder
    from .memory.window import ContextWindowOverview
    from .thread_state import ThreadState
    from .tools import Tool
    from .tools.rules import BaseToolRule, ToolRulesSolver


class AgentMemory:
    """System prompt compilation, compaction, context overview, recall and archival."""

    id: str
    system: str
    blocks: list[Block]
    tools: dict[str, Tool]
    tool_rules: list[BaseToolRule]
    agent_type: AgentType
    max_tokens: int | None
    compaction: Strategy | None
    compaction_threshold: float
    summarizer: Model | None
    embedder: Embedder | None
    embedders: Embedders | None
    recall_count: int
    archival_count: int
    _model: Model
    _context_window: int | None
    _archival: ArchivalMemory | None
    state: ThreadState  # this thread's own (thread_state.py)
    directories: str = ""  # open files and their folders (memory/directories.py)
    conversation_id: str | None  # None: the agent's default thread
    timezone: str  # the dates of its system prompt (an IANA name, as in Letta)

    @property
    def context_window(self) -> int:
        return self._context_window or self._model.context_window

    @context_window.setter
    def context_window(self, window: int | None) -> None:
        """A limit of the agent's own (None: the model's window)."""
        self._context_window = window

    @property
    def output_reserve(self) -> int:
        """Tokens of the window kept free for the answer: ``max_tokens`` up to half the
        window, else the model's output limit up to an eighth of it (a 3,000-token window
        keeps 375, not 4,096)."""
        return self._reserve(self.context_window)

    def _reserve(self, window: int) -> int:
        if self.max_tokens:
            return min(self.max_tokens, window // 2)
        return min(self._model.max_output_tokens or 4096, window // 8)

    def check_window(self, window: int | None = None) -> None:
        """Refuse a context window (the agent's, or ``window``) that cannot hold the system
        prompt, the tool definitions and the answer's reserve (``SystemPromptTooLarge``,
        naming the three)."""
        window = window or self.context_window
        model = self._model.name
        fixed = message_tokens(self.state.transcript[0], model) + tool_tokens(self._tool_specs(),
                                                                          model)
        reserve = self._reserve(window)
        if fixed + reserve > window:
            raise SystemPromptTooLarge(
                f"context_window of {window:,} tokens cannot hold the system prompt and tool "
                f"definitions ({fixed:,} tokens) and the answer's reserve ({reserve:,})")

    def memory_changed(self, block: Block | None = None) -> None:
        """A block changed: recompile the system prompt now, so the next step sees it. A
        value holding a lone surrogate is refused (``ValueError``)."""
        if block is not None:
            check(block.value, f"block {block.label!r}: value")
        if block is not None and self.state.persist is not None:
            self.state.persist.dirty_blocks[block.id] = block.value
        self._refresh_system()

    async def recompile(self, *, dry_run: bool = False) -> str:
        """The system prompt compiled now, from the instructions, the tool rules and the blocks
        as the store holds them (edits made through it are read first); unless ``dry_run`` it
        becomes the agent's first message, stored with the next step or ``save()``."""
        if self.state.persist is not None:
            await self.state.persist.flush()
            await self._sync_blocks()
        if dry_run:
            compiled = self.state.compiled
            text = self._compile_system().text
            self.state.compiled = compiled
            return text
        self.state.compiled = None  # compile even when the key matches: the store may be behind
        self._refresh_system()
        return self.state.transcript[0].text

    def recall_messages(self) -> list[Message]:
        """Every message of an agent without a store: evicted ones, then those in context."""
        return [*self.state.evicted, *(m for m in self.state.transcript[1:] if not is_summary(m))]

    def context_overview(self) -> ContextWindowOverview:
        """How the context window is used, as Letta reports it."""
        solver = self._rules_solver(None)
        return overview(
            window=self.context_window, transcript=self.state.transcript, tools=self._tool_specs(),
            instructions=self.system,
            core_memory="\n\n".join(p for p in (render_blocks(self.blocks), self.directories) if p),
            memory_metadata=self._memory_metadata()
            if self.blocks or self.state.persist is not None else "",
            rules=solver.render_prompt() if solver is not None else "",
            recall_count=self.recall_count, archival_count=self.archival_count,
            model=self._model.name)

    def context_view(self) -> str:
        """The assembled context, message by message with token counts (for debugging)."""
        return format_context(context_rows(self.state.transcript, self._model.name),
                              self.context_window)

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

    def _tool_specs(self) -> list[ToolSpec]:
        return self.agent_type.continuation().tool_specs([t.spec() for t in self.tools.values()])

    def _context_manager(self) -> ContextManager | None:
        if self.compaction is None:
            return None
        if self.state.window is None or self.state.window.window != self.context_window:
            self.state.window = self._new_context_manager(self.compaction)
        return self.state.window

    def _new_context_manager(self, strategy: Strategy) -> ContextManager:
        return ContextManager(window=self.context_window, reserve=self.output_reserve,
                              strategy=strategy,
                              model=lambda: self.summarizer or self._model,
                              threshold=self.compaction_threshold, on_evict=self._evict)

    def _evict(self, messages: list[Message]) -> None:
        if self.state.persist is None:
            self.state.evicted.extend(messages)  # the store keeps them otherwise
        self.state.compiled = None  # the memory metadata counts them: recompile
        self._refresh_system()

    def _prepare_step(self) -> Awaitable[None] | None:
        """Before a step: earlier steps are committed (a crash may lose the step in flight,
        not earlier) and shared blocks brought up to date; something to await only when that
        needs the database."""
        persist = self.state.persist
        assert persist is not None
        if not persist.committed():
            return self._flush_and_sync_blocks()
        return self._sync_blocks() if persist.blocks_may_have_changed() else None

    async def _flush_and_sync_blocks(self) -> None:
        assert self.state.persist is not None
        await self.state.persist.flush()
        if self.state.persist.blocks_may_have_changed():
            await self._sync_blocks()

    async def _sync_blocks(self) -> None:
        assert self.state.persist is not None
        await self.state.persist.sync_blocks(self.blocks)
        # Another thread of this agent may have brought the shared blocks up to date already.
        self._refresh_system()

    def _compile_key(self) -> tuple[Any, ...]:
        return (self.system, [(b.label, b.value, b.description, b.limit, b.read_only)
                              for b in self.blocks], [r.model_dump() for r in self.tool_rules],
                self.directories)

    def _compile_system(self) -> Message:
        self.state.compiled = self._compile_key()
        solver = self._rules_solver(None)
        sections = [self.system, render_blocks(self.blocks), self.directories]
        if self.blocks or self.state.persist is not None:
            sections.append(self._memory_metadata())
        sections.append(solver.render_prompt() if solver is not None else "")
        return system("\n\n".join(section for section in sections if section))

    def _memory_metadata(self) -> str:
        return render_memory_metadata(self.recall_count, self.archival_count, agent_id=self.id,
                                      conversation_id=self.conversation_id,
                                      timezone=self.timezone)

    def _refresh_system(self) -> None:
        """Recompile the system prompt only when what it renders has changed."""
        if self._compile_key() == self.state.compiled:
            return
        compiled = self._compile_system()
        # The same message with the new text, as Letta rebuilds it: one system message in the
        # history however often memory changes.
        first = self.state.transcript[0]
        compiled.id, compiled.created_at = first.id, first.created_at
        self.state.transcript[0] = compiled
        if self.state.persist is not None:
            self.state.persist.system_changed(compiled)

    def _rules_solver(self, resume: Resume | None) -> ToolRulesSolver | None:
        if not self.tool_rules:
            return None
        from .tools.rules import ToolRulesSolver  # lazy: builds pydantic models

        if resume is not None and resume.pending.rules_state is not None:
            return ToolRulesSolver.from_state(self.tool_rules, resume.pending.rules_state)
        return ToolRulesSolver(self.tool_rules)
