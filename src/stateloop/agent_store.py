"""A thread's storage: going on from what the store holds (at load, and after a write
failed), and recording how a run ended.

``ThreadStorage`` is held by each thread (``thread.storage``). It writes the thread's
``ThreadState`` and the counts and blocks named by ``StoredSettings``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from .errors import CheckpointError
from .events import RunEnd
from .memory.blocks import Block
from .memory.directories import render as render_directories
from .memory.directories import stored_directories
from .memory.git_blocks import render_core_memory
from .messages import Message, tool_result, unanswered_calls
from .persistence import stored_state

if TYPE_CHECKING:
    from .agent_memory import ThreadMemory
    from .agent_types import AgentType
    from .approvals import PendingApproval
    from .persistence import Persistence
    from .sleeptime import Sleeptime
    from .store.sql import StoredAgent
    from .thread_state import ThreadState

logger = logging.getLogger("stateloop")
INTERRUPTED_NOTICE = "Tool call was interrupted (the process stopped) before it finished."


class StoredSettings(Protocol):
    """What a thread's storage reads of its thread, and the four things it sets from the
    store: the blocks, the open files' section, and the message and passage counts."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def agent_type(self) -> AgentType: ...
    @property
    def sleeptime(self) -> Sleeptime | None: ...
    @property
    def tags(self) -> list[str]: ...
    blocks: list[Block]
    directories: str
    recall_count: int
    archival_count: int


class ThreadStorage:
    """Loading, reloading after a failed write, and storing runs' ends."""

    def __init__(self, thread: StoredSettings, state: ThreadState,
                 memory: ThreadMemory) -> None:
        self.thread = thread
        self.state = state
        self.memory = memory

    def repair(self, pending: PendingApproval | None) -> None:
        """Answer calls a crash left open (invariant 1); a pending approval's stay open."""
        if pending is not None:
            return  # its step's calls are answered when it resumes
        for call in unanswered_calls(self.state.transcript):
            self.append_outside_run(tool_result(call, INTERRUPTED_NOTICE, is_error=True))

    def append_outside_run(self, message: Message) -> None:
        self.state.transcript.append(message)
        if self.state.persist is not None:
            self.state.persist.unsaved.append(message)  # written with the next checkpoint

    async def use_stored(self, messages: list[Message], pending: PendingApproval | None, *,
                         loaded: StoredAgent | None = None) -> None:
        """Go on from the transcript and pending approval the store holds; ``loaded``: the
        rest read with them (folders, counts), else read now."""
        persist = self.state.persist
        assert persist is not None
        if loaded is not None:
            self.thread.directories = render_directories(loaded.folders, loaded.files)
            self.thread.recall_count = loaded.recall_count
            self.thread.archival_count = loaded.archival_count
        else:
            self.thread.directories = await stored_directories(persist.store, self.thread.id)
            self.thread.recall_count = await persist.store.count_messages(self.thread.id)
            self.thread.archival_count = await persist.store.count_passages(self.thread.id)
        if messages and messages[0].role == "system":
            self.state.transcript[:] = messages
            self.state.compiled = self.memory.compile_key()
        else:  # its system message was lost: compile one (stored with the next step)
            self.state.transcript[:] = [self.memory.compile(), *messages]
            persist.unsaved.append(self.state.transcript[0])
        self.state.pending_approval = pending
        persist.pending_saved = pending is not None
        if not all(part in self.state.transcript[0].text
                   for part in (render_core_memory(self.thread.blocks, self.thread.tags),
                                self.thread.directories)):
            self.state.compiled = None  # blocks changed while no agent had this one loaded
            self.memory.refresh()
        self.repair(pending)

    async def reload(self) -> None:
        """Go back to what the store holds (after a write failed)."""
        persist = self.state.persist
        assert persist is not None
        record = await persist.store.get_agent(self.thread.id)
        blocks, messages, pending = await stored_state(persist.store, record)
        self.thread.blocks = blocks
        await self.use_stored(messages, pending)
        if self.thread.sleeptime is not None:  # its turns may have been counted elsewhere
            await self.thread.sleeptime.reread()
        self.state.stale = False

    async def record_end(self, end: RunEnd) -> RunEnd:
        """Store how the run ended, in one transaction with its last steps. If a step could
        not be stored, the run ends failed and the agent goes on from what the store holds."""
        persist = self.state.persist
        assert persist is not None
        try:
            persist.finish_run(end)  # queued: one transaction with the last steps
            if self.thread.agent_type.clear_after_run and end.pending_approval is None:
                self.state.transcript[1:] = []
                persist.queue_context(self.state.transcript)
            await persist.flush()
            return end
        except CheckpointError as exc:
            error = str(exc)
        await self.store_failed(error)
        stored = {message.id for message in self.state.transcript}
        kept = [m for m in end.messages if m.id in stored]
        self.thread.recall_count -= len(kept)  # counted as stored; the run's end adds them
        return RunEnd(end.run_id, "error", end.steps, end.usage, end.output, error, kept,
                      self.state.pending_approval)

    async def end_unfinished(self, persist: Persistence) -> None:
        """Store the end of a run stopped from outside (cancelled)."""
        try:
            persist.finish_run(None)
            await persist.flush()
        except CheckpointError as exc:
            await self.store_failed(str(exc))

    async def store_failed(self, error: str) -> None:
        """A write failed: record the run as failed and reload what the store holds (at
        the next run, if it cannot be read now)."""
        persist = self.state.persist
        assert persist is not None
        logger.warning("agent %s: %s", self.thread.name, error)
        await persist.recover(error)
        self.state.stale = True
        try:
            await self.reload()
        except Exception as exc:
            logger.warning("agent %s: cannot read its stored state yet (%s); it is read "
                           "again before the next run", self.thread.name, exc)

    async def flush(self) -> None:
        """Commit what is queued outside a run; after a failed write, go back to what the
        store holds and raise."""
        assert self.state.persist is not None
        try:
            await self.state.persist.flush()
        except CheckpointError as exc:
            await self.store_failed(str(exc))
            raise
