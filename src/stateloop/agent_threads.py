"""An agent's threads: the state one conversation keeps (transcript, pending approval, run
lock, steering, compaction), made fresh for the agent's default thread and for each
``Conversation``; opening, forking and deleting conversations; and block edits reaching
every thread."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from .agent_control import AgentControl
from .errors import AgentBusyError, ConfigError
from .memory.context import ContextBuilder
from .persistence import run_blocking
from .steering import Delivery, SteeringQueue

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .agent import Agent
    from .conversation import Conversation
    from .llm.base import Model
    from .memory.blocks import Block
    from .messages import Message


class AgentThreads(AgentControl):
    """Per-thread state, and ``conversation`` / ``fork`` / ``delete_conversation``."""

    conversation_id: str | None = None  # None: the agent's default thread
    _conversations: dict[str, Conversation]

    def _init_thread(self, delivery: Delivery) -> None:
        """The state of one thread, empty: its system prompt compiled from the blocks."""
        self.pending_approval = None
        self.last_result = None
        self._steering = SteeringQueue(delivery)
        self._persist = None
        self._compiled = None
        self._transcript = [self._compile_system()]
        self._context = ContextBuilder(self.context_window)
        self._lock = None
        self._scope = None
        self._resumed = OrderedDict()  # call id -> its resume's end
        self._background: set[asyncio.Task[Any]] = set()
        self._evicted = []  # out of context, kept for recall (no store)
        self._window = None
        self._stale = False  # a write failed and what the store holds could not be read yet

    def _owner(self) -> Agent:
        """The agent whose thread this is (itself, for its default thread)."""
        return self  # type: ignore[return-value]  # Agent is the only class without an owner

    def _threads(self) -> list[Agent]:
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
            lock = thread._lock
            steering = thread._steering
            if (thread.running or (lock is not None and lock[1].locked()) or thread._background
                    or steering.steering or steering.follow_ups
                    or (thread._persist is not None and not thread._persist.settled())
                    # a timer answers it on this object (AgentControl._after_run)
                    or (thread.pending_approval is not None
                        and thread.approval_timeout is not None)):
                return False
        return True

    def memory_changed(self, block: Block | None = None) -> None:
        """A block changed: recompile the system prompt now, so the next step sees it (in
        every thread of the agent that shares it). A value holding a lone surrogate is
        refused (``ValueError``)."""
        super().memory_changed(block)
        for thread in self._threads():
            if thread is not self:
                thread._refresh_system()

    def conversation(self, id: str | None = None, *, summary: str | None = None,
                     isolated_block_labels: Iterable[str] = (),
                     model: str | Model | None = None) -> Conversation:
        """A thread of this agent: a new one, or (with ``id``) one already made, from the
        store if it is not in memory. See ``Conversation``."""
        owner = self._owner()
        live = owner._conversations.get(id) if id is not None else None
        if live is not None:
            return live
        if owner._persist is None:  # nothing to read or write
            if id is not None:
                raise ConfigError(f"agent {owner.name!r} has no conversation {id!r}")
            return self._new_conversation(summary, list(isolated_block_labels), model, [])
        return run_blocking(lambda: self.aconversation(
            id, summary=summary, isolated_block_labels=isolated_block_labels, model=model))

    async def aconversation(self, id: str | None = None, *, summary: str | None = None,
                            isolated_block_labels: Iterable[str] = (),
                            model: str | Model | None = None) -> Conversation:
        """``conversation`` for async code."""
        from .conversation import Conversation

        owner = self._owner()
        if id is not None:
            live = owner._conversations.get(id)
            if live is not None:
                return live
            if owner._persist is None:
                raise ConfigError(f"agent {owner.name!r} has no conversation {id!r}")
            return await Conversation.open_stored(owner, id)
        return await Conversation.start(owner, summary=summary, model=model,
                                        isolated_block_labels=list(isolated_block_labels))

    def fork(self, up_to: str | None = None, *, summary: str | None = None) -> Conversation:
        """A new conversation that starts from copies of this thread's in-context messages,
        through the message ``up_to`` (by default all of them)."""
        if self._owner()._persist is None:
            return self._new_conversation(summary, list(getattr(self, "_isolated", {})),
                                          getattr(self, "_own_model", None),
                                          self._history(up_to))
        return run_blocking(lambda: self.afork(up_to, summary=summary))

    async def afork(self, up_to: str | None = None, *,
                    summary: str | None = None) -> Conversation:
        """``fork`` for async code."""
        from .conversation import Conversation

        return await Conversation.start(
            self._owner(), summary=summary, history=self._history(up_to),
            isolated_block_labels=list(getattr(self, "_isolated", {})),
            model=getattr(self, "_own_model", None))

    def _history(self, up_to: str | None) -> list[Message]:
        messages = self._transcript[1:]
        if up_to is None:
            return messages
        ids = [message.id for message in messages]
        if up_to not in ids:
            raise ConfigError(f"no message {up_to!r} in this thread's context")
        return messages[:ids.index(up_to) + 1]

    def _new_conversation(self, summary: str | None, labels: list[str],
                          model: str | Model | None, history: list[Message]) -> Conversation:
        from .conversation import Conversation

        owner = self._owner()
        conversation = Conversation.new(owner, summary=summary, model=model, history=history,
                                        isolated_block_labels=labels)
        owner._conversations[conversation.key] = conversation
        return conversation

    async def delete_conversation(self, id: str) -> None:
        """Delete a conversation and its messages (nothing the agent shares); a running one
        must be cancelled first."""
        owner = self._owner()
        live = owner._conversations.get(id)
        if live is not None and live.running:
            raise AgentBusyError(f"conversation {id!r} is running; cancel it first")
        if owner._persist is not None:
            await owner._persist.store.delete_conversation(id)
        elif live is None:
            raise ConfigError(f"agent {owner.name!r} has no conversation {id!r}")
        owner._conversations.pop(id, None)
