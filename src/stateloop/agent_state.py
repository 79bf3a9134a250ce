"""A thread's state outside a run, as functions over its ``ThreadState``: reset, save,
replace a message, export and import, compact; and ``ThreadTurn``, the run lock that keeps
these apart from a run in flight (and, on a shared store, orders the thread's runs across
processes).

Each function takes what it needs: the thread's state, its memory and storage collaborators
(``agent_memory.py``, ``agent_store.py``), its name for errors."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .approvals import PendingApproval
from .eager import shielded
from .errors import AgentBusyError, CheckpointError, ConfigError
from .hooks import QueueWait, StepRecord
from .memory.blocks import Block
from .memory.context import ContextBuilder
from .messages import Message

if TYPE_CHECKING:
    from .agent_memory import ThreadMemory
    from .agent_store import ThreadStorage
    from .events import Compaction
    from .thread_state import ThreadState


def refuse_running(state: ThreadState, name: str, doing: str) -> None:
    """``AgentBusyError`` naming the agent and what it cannot do while a run is in flight."""
    if state.running:
        raise AgentBusyError(f"agent {name!r} is running; {doing}")


def reset(state: ThreadState, memory: ThreadMemory, name: str) -> None:
    """Forget the conversation (the system prompt and memory blocks stay)."""
    refuse_running(state, name, "cancel it before reset()")
    state.compiled = None
    state.transcript[:] = [memory.compile()]
    state.pending_approval = None
    if state.persist is not None:  # a stored pending approval is cleared with it
        state.persist.unsaved.append(state.transcript[0])


def checkpoint(state: ThreadState, record: StepRecord, model: str) -> None:
    """Queue what changed (in a step, or outside a run) to be written."""
    assert state.persist is not None
    state.persist.checkpoint(record, state.transcript, model)


async def save(state: ThreadState, storage: ThreadStorage, model: str) -> None:
    """Write what changed outside a run to the store now (nothing while a run is in flight:
    it writes with its next step)."""
    if state.persist is not None and not state.running:
        await _write(state, storage, model, [])


async def _write(state: ThreadState, storage: ThreadStorage, model: str,
                 messages: list[Message]) -> None:
    try:
        # The pending approval as it is now: saving must not clear a stored one.
        checkpoint(state, StepRecord("", 0, messages, pending_approval=state.pending_approval),
                   model)
    except CheckpointError:
        pass  # raised by the flush, which recovers first
    await storage.flush()


def replace_message(state: ThreadState, message: Message, window: int, name: str) -> bool:
    """Put an edited message in place of the in-context one with its id; False when no
    message in context has it."""
    refuse_running(state, name, "edit messages when it ends")
    for index, current in enumerate(state.transcript):
        if current.id == message.id:
            state.transcript[index] = message
            # Prepared request messages are kept by position: start them again.
            state.context = ContextBuilder(window)
            return True
    return False


def export_state(state: ThreadState, blocks: list[Block]) -> dict[str, Any]:
    """The conversation as JSON-able data: transcript, pending approval, blocks."""
    return {
        "messages": [m.to_dict() for m in state.transcript],
        "pending_approval": (state.pending_approval.to_dict()
                             if state.pending_approval else None),
        "blocks": [{"label": b.label, "value": b.value, "description": b.description,
                    "limit": b.limit, "read_only": b.read_only, "id": b.id}
                   for b in blocks],
    }


def read_exported(data: dict[str, Any]
                  ) -> tuple[list[Message], list[Block], PendingApproval | None]:
    """``export_state()``'s data checked: messages (system first), blocks, pending approval."""
    messages = [Message.from_dict(m) for m in data["messages"]]
    if not messages or messages[0].role != "system":
        raise ConfigError("state.messages must start with the system message")
    blocks = [Block(**b) for b in data.get("blocks", [])]
    pending = data.get("pending_approval")
    return messages, blocks, PendingApproval.from_dict(pending) if pending else None


def use_exported(state: ThreadState, memory: ThreadMemory, messages: list[Message],
                 pending: PendingApproval | None) -> None:
    """Go on from exported messages and pending approval (the blocks already in place)."""
    state.pending_approval = pending
    state.transcript[:] = messages
    state.compiled = memory.compile_key()


async def compact(state: ThreadState, memory: ThreadMemory, storage: ThreadStorage,
                  turn: ThreadTurn, model: str, *, everything: bool) -> Compaction | None:
    """Compact now, in the thread's turn: the oldest turns, or with ``everything`` all of
    them, leave for a summary; None when nothing can be evicted."""
    async with turn.hold():
        if state.stale:
            await storage.reload()
        manager = memory.context_manager() or memory.new_context_manager("sliding_window")
        result = await manager.compact(state.transcript, memory.tool_specs(),
                                       everything=everything)
        if result is None:
            return None
        if state.persist is not None:
            await _write(state, storage, model, [result.summary])
        return result.event


class TurnSettings(Protocol):
    """What a thread's turn reads of its thread: who it is, and whether a busy one queues."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def conversation_id(self) -> str | None: ...
    @property
    def busy(self) -> Literal["queue", "reject"]: ...


class ThreadTurn:
    """The run lock of one thread: runs, compaction and anything else that needs the thread
    to itself take turns on it, in arrival order."""

    def __init__(self, thread: TurnSettings, state: ThreadState) -> None:
        self.thread = thread
        self.state = state
        self.waited = QueueWait(0.0)  # how the last turn taken came

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """The thread's turn; on a store several processes share (store/fleet.py) also its
        turn across them. A thread another process ran or changed meanwhile is read from the
        store again before it goes on."""
        lock = self.lock()
        reject = self.thread.busy == "reject"
        if reject and lock.locked():
            raise AgentBusyError(f"agent {self.thread.name!r} is already running; try again "
                                 f"when its run ends")
        persist = self.state.persist
        fleet = persist.store.fleet if persist is not None else None
        arrived = time.perf_counter()
        if fleet is None:
            async with lock:
                self.waited = QueueWait(time.perf_counter() - arrived)
                yield
            return
        agent_id, conversation_id = self.thread.id, self.thread.conversation_id
        turn = fleet.claim(agent_id, conversation_id) or await fleet.enter(agent_id,
                                                                           conversation_id)
        try:
            async with lock:
                await fleet.wait(turn, reject=reject)
                self.waited = QueueWait(time.perf_counter() - arrived, turn.waited)
                self.state.stale = self.state.stale or turn.stale
                yield
        finally:
            await shielded(fleet.leave(turn))

    def lock(self) -> asyncio.Lock:
        """The lock of this event loop (a thread used from another loop gets a new one)."""
        loop = asyncio.get_running_loop()
        if self.state.lock is None or self.state.lock[0] is not loop:
            self.state.lock = (loop, asyncio.Lock())
        return self.state.lock[1]
