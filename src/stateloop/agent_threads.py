"""An agent's threads taken together: whether the agent is idle in all of them, and a block
edit reaching every thread; and the part of one thread's history a fork copies.

Each thread's own state is a ``ThreadState`` (``thread_state.py``); opening, forking and
deleting conversations is ``Agent``'s (``conversation.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from .errors import ConfigError

if TYPE_CHECKING:
    from .agent_memory import ThreadMemory
    from .memory.blocks import Block
    from .messages import Message
    from .sleeptime import Sleeptime
    from .thread_state import ThreadState


class OneThread(Protocol):
    """What is read of each thread of an agent."""

    @property
    def state(self) -> ThreadState: ...
    @property
    def memory(self) -> ThreadMemory: ...


def idle(threads: Sequence[OneThread], sleeptime: Sleeptime | None,
         approval_timeout: float | None) -> bool:
    """Whether an agent can be let go and read from the store again losing nothing: in none
    of its ``threads`` a run in flight or queued, steering, a background run or anything
    unwritten, and no memory run in flight."""
    if sleeptime is not None and sleeptime.busy:
        return False
    for thread in threads:
        state = thread.state
        steering = state.steering
        if (state.running or (state.lock is not None and state.lock[1].locked())
                or state.background or steering.steering or steering.follow_ups
                or (state.persist is not None and not state.persist.settled())
                # a timer answers it on this thread (agent_control.ThreadControl.after_run)
                or (state.pending_approval is not None and approval_timeout is not None)):
            return False
    return True


def memory_changed(memory: ThreadMemory, threads: Sequence[OneThread],
                   block: Block | None = None) -> None:
    """A block changed in the thread of ``memory``: recompile its system prompt now, and
    every other thread's that shares it. A value holding a lone surrogate is refused
    (``ValueError``)."""
    memory.block_changed(block)
    for thread in threads:
        if thread.memory is not memory:
            thread.memory.refresh()


def history(transcript: list[Message], up_to: str | None) -> list[Message]:
    """The messages after the system prompt, through the one with id ``up_to`` (all of
    them by default)."""
    messages = transcript[1:]
    if up_to is None:
        return messages
    ids = [message.id for message in messages]
    if up_to not in ids:
        raise ConfigError(f"no message {up_to!r} in this thread's context")
    return messages[:ids.index(up_to) + 1]
