"""The conversation as state, outside a run: reset, export and import it, save it, compact
it; and the lock that keeps these apart from a run in flight."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from .approvals import PendingApproval
from .eager import shielded
from .errors import AgentBusyError, CheckpointError, ConfigError
from .events import Compaction
from .hooks import StepRecord
from .llm.base import Model
from .memory.blocks import Block
from .memory.context import ContextBuilder
from .messages import Message

if TYPE_CHECKING:
    from .agent_memory import ThreadMemory
    from .agent_store import ThreadStorage
    from .agent_types import AgentType
    from .thread_state import ThreadState


class AgentState:
    """``reset``, ``save``, ``export_state``/``import_state``, ``compact``; whether a run is in
    flight."""

    id: str
    name: str
    agent_type: AgentType
    blocks: list[Block]
    directories: str = ""  # open files and their folders (memory/directories.py)
    recall_count: int
    archival_count: int
    conversation_id: str | None = None  # None: the agent's default thread
    state: ThreadState  # this thread's own (thread_state.py)
    memory: ThreadMemory  # its system prompt, window and blocks (agent_memory.py)
    storage: ThreadStorage  # going on from the store, runs' ends (agent_store.py)
    busy: Literal["queue", "reject"]
    context_window: int
    _model: Model

    @property
    def running(self) -> bool:
        return self.state.scope is not None

    def reset(self) -> None:
        """Forget the conversation (the system prompt and memory blocks stay)."""
        if self.running:
            raise AgentBusyError(f"agent {self.name!r} is running; cancel it before reset()")
        self.state.compiled = None
        self.state.transcript[:] = [self.memory.compile()]
        self.state.pending_approval = None
        if self.state.persist is not None:  # a stored pending approval is cleared with it
            self.state.persist.unsaved.append(self.state.transcript[0])

    async def save(self) -> None:
        """Write what changed outside a run (a reset, a cancelled approval) to the store now;
        otherwise it is written with the next step."""
        if self.state.persist is not None and not self.running:
            try:
                # The pending approval as it is now: saving must not clear a stored one.
                self._checkpoint(StepRecord("", 0, [],
                                            pending_approval=self.state.pending_approval))
            except CheckpointError:
                pass  # raised by the flush, which recovers first
            await self.storage.flush()

    def replace_message(self, message: Message) -> bool:
        """Put an edited message in place of the in-context one with its id (the caller
        stores it); the next request sends it. False when no message in context has it."""
        if self.running:
            raise AgentBusyError(f"agent {self.name!r} is running; edit messages when it ends")
        for index, current in enumerate(self.state.transcript):
            if current.id == message.id:
                self.state.transcript[index] = message
                # Prepared request messages are kept by position: start them again.
                self.state.context = ContextBuilder(self.context_window)
                return True
        return False

    def export_state(self) -> dict[str, Any]:
        """The conversation as JSON-able data: transcript and any pending approval."""
        return {
            "messages": [m.to_dict() for m in self.state.transcript],
            "pending_approval": (self.state.pending_approval.to_dict()
                                 if self.state.pending_approval else None),
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
        self.state.pending_approval = PendingApproval.from_dict(pending) if pending else None
        self.state.transcript[:] = messages
        self.state.compiled = self.memory.compile_key()

    async def compact(self, *, everything: bool = False) -> Compaction | None:
        """Compact now (waiting for a run in flight): the oldest turns, or with
        ``everything`` all of them, leave for a summary; None when nothing can be evicted."""
        async with self._turn():
            if self.state.stale:
                await self.storage.reload()
            manager = (self.memory.context_manager()
                       or self.memory.new_context_manager("sliding_window"))
            result = await manager.compact(self.state.transcript, self.memory.tool_specs(),
                                           everything=everything)
            if result is None:
                return None
            if self.state.persist is not None:
                try:
                    self._checkpoint(StepRecord("", 0, [result.summary],
                                                pending_approval=self.state.pending_approval))
                except CheckpointError:
                    pass  # raised by the flush, which recovers first
                await self.storage.flush()
            return result.event

    @contextlib.asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        """The run lock; on a store several processes share (store/fleet.py) also this
        thread's turn across them, taken in arrival order. A thread another process ran or
        changed meanwhile is read from the store again before it goes on."""
        lock = self._run_lock()
        if self.busy == "reject" and lock.locked():
            raise AgentBusyError(f"agent {self.name!r} is already running; try again when "
                                 f"its run ends")
        fleet = self.state.persist.store.fleet if self.state.persist is not None else None
        if fleet is None:
            async with lock:
                yield
            return
        turn = (fleet.claim(self.id, self.conversation_id)
                or await fleet.enter(self.id, self.conversation_id))
        try:
            async with lock:
                await fleet.wait(turn, reject=self.busy == "reject")
                self.state.stale = self.state.stale or turn.stale
                yield
        finally:
            await shielded(fleet.leave(turn))

    def _run_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self.state.lock is None or self.state.lock[0] is not loop:
            self.state.lock = (loop, asyncio.Lock())
        return self.state.lock[1]

    def _checkpoint(self, record: StepRecord) -> None:
        """Queue what changed (in a step, or outside a run) to be written."""
        assert self.state.persist is not None
        self.state.persist.checkpoint(record, self.state.transcript, self._model.name)
