"""An agent's threads: whether the agent is idle in all of them, and block edits reaching
every thread. Each thread's own state is a ``ThreadState`` (``thread_state.py``), made by
``AgentRuns._init_thread``; opening, forking and deleting conversations is ``Agent``'s
(``conversation.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .agent_control import AgentControl
from .errors import ConfigError

if TYPE_CHECKING:

    from .agent import Agent, Thread
    from .conversation import Conversation
    from .memory.blocks import Block
    from .messages import Message


class AgentThreads(AgentControl):
    """Whether the agent is idle in all its threads; block edits reaching each."""

    _conversations: dict[str, Conversation]

    def _owner(self) -> Agent:
        """The agent whose thread this is (itself, for its default thread)."""
        return self  # type: ignore[return-value]  # Agent is the only class without an owner

    def _threads(self) -> list[Thread]:
        owner = self._owner()
        return [owner, *owner._conversations.values()]

    @property
    def idle(self) -> bool:
        """Whether the agent can be let go and read from the store again losing nothing: in
        none of its threads a run in flight or queued, steering, a background run or
        anything unwritten, and no memory run in flight."""
        owner = self._owner()
        if owner.sleeptime is not None and owner.sleeptime.busy:
            return False
        for thread in self._threads():
            lock = thread.state.lock
            steering = thread.state.steering
            if (thread.running or (lock is not None and lock[1].locked()) or thread.state.background
                    or steering.steering or steering.follow_ups
                    or (thread.state.persist is not None and not thread.state.persist.settled())
                    # a timer answers it on this object (AgentControl._after_run)
                    or (thread.pending_approval is not None
                        and thread.approval_timeout is not None)):
                return False
        return True

    def memory_changed(self, block: Block | None = None) -> None:
        """A block changed: recompile the system prompt now, so the next step sees it (in
        every thread of the agent that shares it). A value holding a lone surrogate is
        refused (``ValueError``)."""
        self.memory.block_changed(block)
        for thread in self._threads():
            if thread is not self:
                thread.memory.refresh()

    def _history(self, up_to: str | None) -> list[Message]:
        messages = self.state.transcript[1:]
        if up_to is None:
            return messages
        ids = [message.id for message in messages]
        if up_to not in ids:
            raise ConfigError(f"no message {up_to!r} in this thread's context")
        return messages[:ids.index(up_to) + 1]
