"""Binds an agent to a store: creation, loading, step checkpoints, runs, shared blocks.

SQL stays in ``store/``; this module speaks only records. One store is opened per URL and
process, and reused by every agent on it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .approvals import PendingApproval
from .events import RunEnd, StopReason
from .hooks import StepRecord
from .llm.tokens import message_tokens
from .memory.blocks import Block
from .messages import Message
from .store.records import APPEND, KEEP
from .store.records import StepRecord as StoredStep

if TYPE_CHECKING:
    from .store.records import AgentRecord, BlockRecord, RunRecord
    from .store.runner import Queued
    from .store.sql import SqlStore

T = TypeVar("T")

_stores: dict[str, SqlStore] = {}
CROSS_PROCESS_LAG = 0.005  # seconds a run may take to see another process's block edit
_FAILED_STOPS = frozenset({"error", "llm_api_error", "invalid_llm_response", "invalid_tool_call",
                           "context_window_overflow_in_system_prompt", "timeout",
                           "error_threshold"})


def run_blocking(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from sync code, inside a running event loop or not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())  # type: ignore[arg-type]
    # Called from async code: a short-lived loop in a worker thread (startup work only).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()  # type: ignore[arg-type]


async def get_store(store: str | SqlStore) -> SqlStore:
    """The store for a URL, opened (and migrated) once per process; a store is returned as is."""
    if not isinstance(store, str):
        return store
    found = _stores.get(store)
    if found is None:
        from .store import open_store

        found = _stores[store] = await open_store(store)
    return found


def run_status(reason: StopReason | None) -> str:
    if reason == "cancelled":
        return "cancelled"
    return "failed" if reason is None or reason in _FAILED_STOPS else "completed"


def block_record(block: Block) -> BlockRecord:
    from .store.records import BlockRecord

    return BlockRecord(block.label, block.value, block.limit, block.id, block.description,
                       block.read_only)


def block_from_record(record: BlockRecord) -> Block:
    return Block(record.label, record.value, record.description, record.limit,
                 record.read_only, record.id)


class Persistence:
    """One agent's link to its store. The agent calls it at run start and end, at every
    checkpoint, and before every step (to see blocks other agents changed)."""

    def __init__(self, store: SqlStore, agent_id: str) -> None:
        self.store = store
        self.agent_id = agent_id
        self.unsaved: list[Message] = []  # appended outside a step: written with the next one
        self.dirty_blocks: dict[str, str] = {}  # block id -> value, edited since the checkpoint
        self.pending_saved = False
        self._token: tuple[int, int | None] | None = None
        self._queued: deque[Queued] = deque()  # writes whose outcome flush has not seen
        self._run: RunRecord | None = None  # the run in flight, as created
        self._seen_this_run = False  # blocks_may_have_changed asked the database this run
        self._context: list[Message] | None = None  # the context as last written, if known

    @classmethod
    async def create(cls, store: str | SqlStore, record: AgentRecord, blocks: list[Block],
                     system: Message) -> Persistence:
        db = await get_store(store)
        await db.create_agent(record, [block_record(b) for b in blocks])
        await db.append_step(record.id, [system], in_context_ids=APPEND)
        persistence = cls(db, record.id)
        persistence._context = [system]
        return persistence

    def start_run(self) -> str:
        """A new run, queued: it lands with the run's first step."""
        self._run, queued = self.store.queue_run(self.agent_id)
        self._seen_this_run = False
        self._queued.append(queued)
        return self._run.id

    def finish_run(self, end: RunEnd | None) -> None:
        """Queue how the run ended (``end`` is None when it was cancelled from outside); it
        lands with the run's last step. ``flush`` waits for it."""
        assert self._run is not None
        reason: StopReason = end.stop_reason if end is not None else "cancelled"
        self._queued.append(self.store.queue_finish(
            self._run, run_status(reason), reason,
            end.error if end is not None else "cancelled"))

    async def flush(self) -> None:
        """Commit the queued writes; raise the first failure (a lost step, say)."""
        await self.store.flush()
        self._raise_failed()

    def make_durable(self) -> bool:
        """Before a step: earlier steps must survive a crash (DESIGN invariant 3), though
        they may commit later. False when they must be committed first (``flush``); raises
        the first write that failed."""
        logged = self.store.log_queued()
        self._raise_failed()
        return logged

    def _raise_failed(self) -> None:
        queued = self._queued
        while queued and queued[0].done():
            error = queued.popleft().exception()
            if error is not None:
                queued.clear()  # later steps were written after a gap: report it once
                self._context = None  # the stored context is not what was sent: rewrite it
                raise error

    def checkpoint(self, record: StepRecord, transcript: list[Message], model: str) -> None:
        """Queue one step's write, one transaction: its messages (with their token counts
        for ``model``) and the step record, the in-context ids, edited blocks and the
        pending approval. It commits at the next turn of the event loop or with later steps
        (``make_durable`` keeps it safe meanwhile), at the latest in ``flush`` (at the run's
        end), which raises if it failed."""
        messages = [*self.unsaved, *record.messages] if self.unsaved else record.messages
        for message in messages:
            message_tokens(message, model)  # stored with the message, counted once
        step = None
        if record.step:
            step = StoredStep(run_id=record.run_id, index=record.step - 1, model=record.model,
                              usage=record.usage, latency_ms=record.duration * 1000,
                              finish_reason=record.finish_reason)
        pending: Any = KEEP
        if record.pending_approval is not None:
            pending, self.pending_saved = record.pending_approval.to_dict(), True
        elif self.pending_saved:  # the stored one was answered: clear it
            pending, self.pending_saved = None, False
        self._queued.append(self.store.queue_step(
            self.agent_id, messages, in_context=self._context_change(transcript, messages),
            step=step, run_id=record.run_id, block_values=self.dirty_blocks or None,
            pending_approval=pending))
        self.unsaved = []
        self.dirty_blocks = {}

    def _context_change(self, transcript: list[Message], written: list[Message]) -> Any:
        """``APPEND`` when the context grew by exactly the messages written (so the stored
        list stays as it is), else the new context."""
        before = self._context
        if before is not None:
            kept = len(before)
            if (len(transcript) == kept + len(written) and transcript[kept:] == written
                    and transcript[:kept] == before):
                before.extend(written)  # the snapshot follows without a copy
                return APPEND
        self._context = list(transcript)
        return self._context

    def queue_context(self, transcript: list[Message]) -> None:
        """Queue a new context outside a step (a cleared message buffer); it lands with the
        writes queued before it (the run's end)."""
        self._context = list(transcript)
        self._queued.append(self.store.queue_step(self.agent_id, [], in_context=transcript))

    def blocks_may_have_changed(self) -> bool:
        """Whether anything may have changed the agent's blocks since the last look (another
        agent sharing a block, another process): cheap, so it runs before every step. A
        run's first step always asks the database; later steps see other processes' commits
        within ``CROSS_PROCESS_LAG`` seconds (asking costs more than a fast step)."""
        token = self.store.change_token(CROSS_PROCESS_LAG if self._seen_this_run else 0.0)
        self._seen_this_run = True
        if token == self._token and token[1] is not None:
            return False
        self._token = token
        return True

    async def sync_blocks(self, blocks: list[Block]) -> bool:
        """Bring ``blocks`` up to date with the store; True when something changed."""
        stored = await self.store.list_blocks(self.agent_id)
        by_id = {block.id: block for block in blocks}
        fresh = []
        changed = len(stored) != len(blocks)
        for record in stored:
            block = by_id.get(record.id)
            if block is None:
                block, changed = block_from_record(record), True
            elif (block.value, block.label, block.limit, block.read_only, block.description) != (
                    record.value, record.label, record.limit, record.read_only,
                    record.description):
                block.value, block.label, block.limit = record.value, record.label, record.limit
                block.read_only, block.description = record.read_only, record.description
                changed = True
            fresh.append(block)
        blocks[:] = fresh
        return changed


async def load_state(store: str | SqlStore, id_or_name: str
                     ) -> tuple[SqlStore, AgentRecord, list[Block], list[Message],
                                PendingApproval | None]:
    """Everything ``Agent.load`` needs; runs left running by a crash are marked failed."""
    db = await get_store(store)
    record = await db.get_agent(id_or_name)
    await db.fail_interrupted_runs(record.id)
    blocks = [block_from_record(b) for b in await db.list_blocks(record.id)]
    messages = await db.get_messages(record.in_context_message_ids)
    pending = (PendingApproval.from_dict(record.pending_approval)
               if record.pending_approval else None)
    return db, record, blocks, messages, pending
