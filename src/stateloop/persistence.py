"""Binds an agent to a store: creation, loading, step checkpoints, runs, shared blocks.

SQL stays in ``store/``; this module speaks only records. One store is opened per URL and
process, and reused by every agent on it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .approvals import PendingApproval
from .errors import CheckpointError, ConfigError
from .events import RunEnd, StopReason
from .hooks import StepRecord
from .llm.tokens import message_tokens
from .memory.blocks import Block
from .messages import Message
from .store import open_store, serving
from .store.records import APPEND, KEEP, BlockRecord, step_record_id
from .store.records import StepRecord as StoredStep

if TYPE_CHECKING:
    from .store.records import AgentRecord, BlockRecord, RunRecord
    from .store.runner import Queued
    from .store.sql import SqlStore, StoredAgent

T = TypeVar("T")
logger = logging.getLogger("stateloop")

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
    """The store for a URL, opened (and migrated) once per process; a store is returned as is.
    A SQLite file a stateloop server holds is refused with a ``ConfigError`` naming the
    server: an agent run here too would keep a history the server's copy does not see."""
    if not isinstance(store, str):
        return store
    server = serving(store)
    if server is not None:
        raise ConfigError(
            f"the stateloop server at {server} has the database {store!r} open: an agent "
            f"loaded here too would fork its history. Talk to the server instead (e.g. "
            f"letta_client.Letta(base_url={server!r}), or `stateloop chat NAME --server "
            f"{server}`), or stop it first")
    found = _stores.get(store)
    if found is None:
        found = _stores[store] = await open_store(store)
    return found


def run_status(reason: StopReason | None) -> str:
    if reason == "cancelled":
        return "cancelled"
    return "failed" if reason is None or reason in _FAILED_STOPS else "completed"


def block_record(block: Block) -> BlockRecord:
    return BlockRecord(block.label, block.value, block.limit, block.id, block.description,
                       block.read_only)


def block_from_record(record: BlockRecord) -> Block:
    return Block(record.label, record.value, record.description, record.limit,
                 record.read_only, record.id)


class Persistence:
    """One agent's link to its store. The agent calls it at run start and end, at every
    checkpoint, and before every step (to see blocks other agents changed).

    A write that fails (a full disk, a read-only file) is reported once, as a
    ``CheckpointError``, by the next call that looks; nothing more is queued until the agent
    has called ``recover`` and gone back to what the store holds."""

    def __init__(self, store: SqlStore, agent_id: str, conversation_id: str | None = None,
                 context: list[Message] | None = None, *, blocks_token: Any = None) -> None:
        self.store = store
        self.agent_id = agent_id
        self.conversation_id = conversation_id  # None: the agent's default thread
        self.unsaved: list[Message] = []  # appended outside a step: written with the next one
        self.system: Message | None = None  # a recompiled system prompt: stored in place
        self.dirty_blocks: dict[str, str] = {}  # block id -> value, edited since the checkpoint
        self.pending_saved = False
        self.failure: BaseException | None = None  # the write that failed, until ``recover``
        self._token = blocks_token  # the store's change_token the blocks were last seen at
        self._queued: deque[Queued] = deque()  # writes whose outcome flush has not seen
        self._run: RunRecord | None = None  # the run in flight, as created
        self._run_start: Queued | None = None  # its row's write
        self._ending: RunRecord | None = None  # the run whose end is queued, until it lands
        self._unrecorded: list[tuple[RunRecord, bool]] = []  # failed runs' ends to write again
        self._retried: list[tuple[RunRecord, bool, Queued]] = []  # ... as written again
        self._seen_this_run = False  # blocks_may_have_changed asked the database this run
        self._context = context  # the context as last written, if known

    @classmethod
    async def create(cls, store: str | SqlStore, record: AgentRecord, blocks: list[Block],
                     system: Message) -> Persistence:
        db = await get_store(store)
        await db.create_agent(record, [block_record(b) for b in blocks], unique_name=True)
        await db.append_step(record.id, [system], in_context_ids=APPEND)
        return cls(db, record.id, context=[system])

    def system_changed(self, message: Message) -> None:
        """The system prompt was recompiled into ``message``, which keeps the stored one's id:
        it replaces that one with the next checkpoint (or the unsaved one, if not stored)."""
        for index, waiting in enumerate(self.unsaved):
            if waiting.id == message.id:
                self.unsaved[index] = message
                return
        self.system = message

    @property
    def run_open(self) -> bool:
        """A run was started and its end not queued yet."""
        return self._run is not None

    def start_run(self) -> str:
        """A new run, queued: it lands with the run's first step (after the ends of failed
        runs that could not be written before)."""
        self._settle_retries()
        self._retried = [(run, started, self._queue_failed_end(run, started))
                         for run, started in self._unrecorded]
        self._unrecorded = []
        self._run, self._run_start = self.store.queue_run(self.agent_id, self.conversation_id)
        self._seen_this_run = False
        self._queued.append(self._run_start)
        return self._run.id

    def finish_run(self, end: RunEnd | None) -> None:
        """Queue how the run ended (``end`` is None when it was cancelled from outside); it
        lands with the run's last step. ``flush`` waits for it. After a failed write use
        ``recover`` instead."""
        run, self._run = self._run, None
        assert run is not None
        self._ending = run
        self._check()
        reason: StopReason = end.stop_reason if end is not None else "cancelled"
        self._queued.append(self.store.queue_finish(
            run, run_status(reason), reason, end.error if end is not None else "cancelled"))

    async def flush(self) -> None:
        """Commit the queued writes; raise the first failure as a ``CheckpointError``."""
        await self.store.flush()
        self._check()
        self._ending = None

    def committed(self) -> bool:
        """Whether every write this agent queued has committed. A step begins only then (a
        crash loses at most the step in flight: DESIGN invariant 3); if not, ``flush``
        first. Raises ``CheckpointError`` if a write failed."""
        self._check()
        return not self._queued

    def settled(self) -> bool:
        """Whether the store holds everything of this thread: no run open, nothing queued,
        written outside a step or failed."""
        return not (self._run or self._ending or self.unsaved or self.dirty_blocks
                    or self.system is not None or self.failure is not None
                    or self._unrecorded or any(not q.done() for q in self._queued))

    def _check(self) -> None:
        """Raise ``CheckpointError`` if a queued write failed (or one did before)."""
        queued = self._queued
        while queued and queued[0].done():
            error = queued.popleft().exception()
            if error is not None and self.failure is None:
                self.failure = error
        if self.failure is not None:
            raise CheckpointError(f"the step could not be stored: {describe(self.failure)}")

    async def recover(self, error: str) -> None:
        """After a failed write: end the run as failed with ``error`` and forget what was
        not stored; the agent then reads what the store holds again (``stored_state``).
        The run's end is written again at the next run's start if it cannot be now."""
        await self.store.flush()  # what is still queued fails too (its chain is broken)
        self._settle_retries()
        run, self._run, self._ending = self._run or self._ending, None, None
        start, self._run_start = self._run_start, None
        self._queued.clear()
        self.failure = None
        self.unsaved, self.dirty_blocks, self.system = [], {}, None
        self.pending_saved = True  # not known: the next checkpoint writes it either way
        self._token = None  # blocks are read again before the next step
        self._context = None
        if run is None:
            return
        run.error = error
        started = start is not None and start.done() and start.exception() is None
        queued = self._queue_failed_end(run, started)
        await self.store.flush()
        if queued.exception() is not None:
            logger.warning("could not record the end of run %s: %s", run.id,
                           describe(queued.exception()))
            self._unrecorded.append((run, started))

    def _settle_retries(self) -> None:
        """Failed runs' ends written again that failed again: to write at the next run."""
        for run, started, queued in self._retried:
            if not queued.done() or queued.exception() is not None:
                self._unrecorded.append((run, started))
        self._retried = []

    def _queue_failed_end(self, run: RunRecord, started: bool) -> Queued:
        if not started:  # its row never landed: it lands now, with its end
            self.store.requeue_run(run)
        return self.store.queue_finish(run, "failed", "error", run.error)

    def checkpoint(self, record: StepRecord, transcript: list[Message], model: str) -> None:
        """Queue one step's write, one transaction: its messages (with their token counts
        for ``model``) and the step record, the in-context ids, edited blocks and the
        pending approval. It commits at the next turn of the event loop (with whatever other
        agents queued meanwhile), or in ``flush`` when the next step or the run's end comes
        first (see ``committed``). Raises ``CheckpointError`` if an earlier write failed:
        nothing is queued then."""
        self._check()
        messages = [*self.unsaved, *record.messages] if self.unsaved else record.messages
        for message in messages:
            message_tokens(message, model)  # stored with the message, counted once
        system = self.system
        if system is not None:
            message_tokens(system, model)
        step = None
        if record.step:
            step = StoredStep(run_id=record.run_id, index=record.step - 1, model=record.model,
                              id=step_record_id(record.run_id, record.step - 1),
                              usage=record.usage, latency_ms=record.duration * 1000,
                              finish_reason=record.finish_reason,
                              metadata=step_metrics(record))
        pending: Any = KEEP
        if record.pending_approval is not None:
            pending, self.pending_saved = record.pending_approval.to_dict(), True
        elif self.pending_saved:  # the stored one was answered: clear it
            pending, self.pending_saved = None, False
        try:
            queued = self.store.queue_step(
                self.agent_id, messages, in_context=self._context_change(transcript, messages),
                step=step, run_id=record.run_id, block_values=self.dirty_blocks or None,
                pending_approval=pending, conversation_id=self.conversation_id,
                system=system)
        except Exception as exc:  # its rows could not even be encoded
            self.failure = exc
            self._check()
            raise
        self._queued.append(queued)
        record.commit_times = queued.commit_times
        self.unsaved = []
        self.dirty_blocks = {}
        self.system = None

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
        self._check()
        self._context = list(transcript)
        self._queued.append(self.store.queue_step(self.agent_id, [], in_context=transcript,
                                                  conversation_id=self.conversation_id))

    def blocks_may_have_changed(self) -> bool:
        """Whether anything may have changed the agent's blocks since the last look (another
        agent sharing a block, another process): cheap, so it runs before every step. A
        run's first step always asks the database; later steps see other processes' commits
        within ``CROSS_PROCESS_LAG`` seconds (asking costs more than a fast step)."""
        token = self.store.change_token(self.agent_id,
                                        CROSS_PROCESS_LAG if self._seen_this_run else 0.0)
        self._seen_this_run = True
        return token is None or token != self._token

    async def sync_blocks(self, blocks: list[Block]) -> bool:
        """Bring ``blocks`` up to date with the store; True when something changed."""
        stored, self._token = await self.store.read_blocks(self.agent_id)
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


async def load_state(store: str | SqlStore, id_or_name: str | StoredAgent
                     ) -> tuple[SqlStore, StoredAgent, list[Block], PendingApproval | None]:
    """Everything ``Agent.load`` needs, read in one transaction (unless ``id_or_name`` is
    what was read); runs left running by a crash are marked failed."""
    db = await get_store(store)
    stored = await db.load_agent(id_or_name) if isinstance(id_or_name, str) else id_or_name
    return (db, stored, [block_from_record(b) for b in stored.blocks],
            pending_of(stored.record))


def pending_of(record: AgentRecord) -> PendingApproval | None:
    """The approval the agent's record keeps pending, if any."""
    return PendingApproval.from_dict(record.pending_approval) if record.pending_approval else None


async def stored_state(db: SqlStore, record: AgentRecord
                       ) -> tuple[list[Block], list[Message], PendingApproval | None]:
    """The agent's blocks, in-context messages and pending approval, as stored."""
    blocks = [block_from_record(b) for b in await db.list_blocks(record.id)]
    messages = await db.get_context(record.id, record.in_context_message_ids)
    return blocks, messages, pending_of(record)


def describe(error: BaseException | None) -> str:
    """A failed write's error as one line: its type and message."""
    if error is None:
        return "unknown error"
    cause = getattr(error, "orig", None) or error  # SQLAlchemy wraps the driver's error
    return f"{type(cause).__name__}: {cause}"


def step_metrics(record: StepRecord) -> dict[str, Any]:
    """What a stored step keeps of its timing (its metadata's ``metrics``, nanoseconds) and
    of its trace (``trace_id``, when the run was traced)."""
    timing = record.timing
    traced = {"trace_id": record.trace_id} if record.trace_id else {}
    if timing is None:
        return traced
    return {**traced, "metrics": {"step_start_ns": int(record.started_at * 1e9),
                        "step_ns": int(record.duration * 1e9),
                        "llm_request_start_ns": timing.llm_request_start_ns,
                        "llm_request_ns": timing.llm_request_ns,
                        "time_to_first_token_ns": timing.time_to_first_token_ns,
                        "tool_execution_ns": timing.tool_execution_ns,
                        "tool_calls": _tool_call_times(record)}}


def _tool_call_times(record: StepRecord) -> list[list[Any]]:
    """Each tool call of the step as ``[id, tool name, start ns, end ns, failed]`` (what a
    run's trace is rebuilt from)."""
    assert record.timing is not None
    names = {call.id: call.name for message in record.messages for call in message.tool_calls}
    failed = {message.tool_call_id for message in record.messages
              if message.role == "tool" and message.is_error}
    return [[call_id, names.get(call_id, "unknown"), began, done, call_id in failed]
            for call_id, (began, done) in record.timing.tool_calls.items()]
