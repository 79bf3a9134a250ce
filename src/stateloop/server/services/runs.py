"""Runs in flight: each run is driven by a background task into a ``RunChannel``, a bounded
buffer of Letta frames with sequence ids that any number of readers follow (the request that
started it, or a client resuming ``/v1/runs/{id}/stream`` from a cursor). On PostgreSQL the
frames are written to the store too, for readers in other processes (run_frames.py)."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from ...approvals import Approval
from ...events import AnyEvent, RunEnd
from ...memory.skills import ClientSkill
from ...messages import Message
from ...tools import Tool
from .messages import Frame, StreamConverter, approval_names
from .run_frames import FrameLog

if TYPE_CHECKING:
    from ...agent import Thread

logger = logging.getLogger("stateloop.server")


class RunChannel:
    """The frames of one run, numbered from 1; the oldest are dropped past ``capacity``."""

    def __init__(self, agent_id: str, *, capacity: int) -> None:
        self.agent_id = agent_id
        self.run_id: str | None = None
        self.end: RunEnd | None = None
        self.done = False
        self._frames: list[Frame] = []
        self._first_seq = 1  # seq_id of self._frames[0]
        self._capacity = capacity
        self._changed = asyncio.Condition()

    @property
    def last_seq(self) -> int:
        return self._first_seq + len(self._frames) - 1

    async def publish(self, frames: Sequence[Frame]) -> None:
        if not frames:
            return
        for frame in frames:
            frame["seq_id"] = self._first_seq + len(self._frames)
            self._frames.append(frame)
        overflow = len(self._frames) - self._capacity
        if overflow > 0:
            del self._frames[:overflow]
            self._first_seq += overflow
        async with self._changed:
            self._changed.notify_all()

    async def close(self) -> None:
        self.done = True
        async with self._changed:
            self._changed.notify_all()

    def frames(self) -> list[Frame]:
        return list(self._frames)

    async def follow(self, after: int = 0, *, ping_interval: float | None = None
                     ) -> AsyncIterator[Frame | None]:
        """Frames with ``seq_id > after`` as they come, until the run ends; ``None`` after
        ``ping_interval`` quiet seconds (the caller sends a keepalive)."""
        cursor = after
        while True:
            start = max(cursor + 1, self._first_seq)
            fresh = self._frames[start - self._first_seq:]
            for frame in fresh:
                yield frame
            cursor = max(cursor, start + len(fresh) - 1)
            if self.done and cursor >= self.last_seq:
                return
            async with self._changed:
                if self.last_seq > cursor or self.done:
                    continue
                try:
                    await asyncio.wait_for(self._changed.wait(), ping_interval)
                except TimeoutError:
                    yield None


class RunRegistry:
    """Channels by run id (finished ones kept up to a bound) and the run in flight per agent."""

    def __init__(self, *, events_per_run: int, finished_runs: int) -> None:
        self.events_per_run = events_per_run
        self.finished_runs = finished_runs
        self._channels: OrderedDict[str, RunChannel] = OrderedDict()
        self.active: dict[str, RunChannel] = {}  # agent or conversation id -> its run
        self._tasks: set[asyncio.Task[None]] = set()
        self._log: FrameLog | None = None  # made with the first run on PostgreSQL

    def get(self, run_id: str) -> RunChannel | None:
        return self._channels.get(run_id)

    def latest(self, key: str) -> RunChannel | None:
        """The run of this agent or conversation in flight, else its newest one kept."""
        active = self.active.get(key)
        if active is not None:
            return active
        return next((c for c in reversed(self._channels.values()) if c.agent_id == key), None)

    async def start(self, agent: Thread, messages: list[Message], approvals: list[Approval], *,
                    stream_tokens: bool, max_steps: int | None = None,
                    model: str | None = None, tools: Sequence[Tool] = (),
                    skills: Sequence[ClientSkill] = (),
                    assistant_message: bool = True) -> RunChannel:
        """Start a run in the background; returns once the agent accepted it (raises what
        the agent raises on refusal: busy, pending approval, approvals that do not fit)."""
        # Keyed by thread: each conversation of an agent has its own run in flight.
        channel = RunChannel(agent.conversation_id or agent.id, capacity=self.events_per_run)
        names = approval_names(agent) | {tool.name for tool in tools if tool.requires_approval}
        converter = StreamConverter(stream_tokens=stream_tokens, approval_names=names,
                                    assistant_message=assistant_message)
        accepted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        run = agent.stream(messages or None, approvals=approvals or None, max_steps=max_steps,
                           model=model, tools=tools, skills=skills)
        task = asyncio.create_task(self._drive(agent, run, channel, converter, accepted,
                                               self._frame_log(agent)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        await accepted
        return channel

    def _frame_log(self, agent: Thread) -> FrameLog | None:
        """Where frames go for other processes: the agents' store (the server's one), if it
        is PostgreSQL; on SQLite no other process serves it."""
        store = agent.store
        if self._log is None and store is not None and store.dialect == "postgresql":
            self._log = FrameLog(store, keep=self.events_per_run)
        return self._log

    async def _drive(self, agent: Thread, run: AsyncIterator[AnyEvent], channel: RunChannel,
                     converter: StreamConverter, accepted: asyncio.Future[None],
                     log: FrameLog | None) -> None:

        async def emit(frames: list[Frame]) -> None:
            await channel.publish(frames)
            if log is not None and channel.run_id is not None and frames:
                log.add(channel.run_id, frames)

        try:
            async for event in run:
                if not accepted.done():
                    run_id = getattr(event, "run_id", None)
                    self._register(channel, run_id)
                    accepted.set_result(None)
                if type(event) is RunEnd:
                    channel.end = event
                await emit(converter.feed(event))
                if log is not None and event.type == "step_end":
                    log.flush_soon()  # a reader elsewhere sees the step whole at once
        except Exception as exc:
            if not accepted.done():
                accepted.set_exception(exc)
                return
            logger.exception("run %s of agent %s failed", channel.run_id, agent.id)
            await emit([{"message_type": "error_message", "run_id": channel.run_id,
                         "error_type": "internal_error", "message": str(exc), "detail": None}])
        finally:
            if self.active.get(channel.agent_id) is channel:
                del self.active[channel.agent_id]
            await channel.close()
            if log is not None and channel.run_id is not None:
                log.end(channel.run_id, channel.last_seq)
            if not accepted.done():
                accepted.cancel()

    def _register(self, channel: RunChannel, run_id: str | None) -> None:
        channel.run_id = run_id
        self.active[channel.agent_id] = channel
        if run_id is not None:
            self._channels[run_id] = channel
            while len(self._channels) > self.finished_runs:
                oldest_id, oldest = next(iter(self._channels.items()))
                if not oldest.done:
                    break
                del self._channels[oldest_id]

    async def close(self) -> None:
        """Cancel every run task (server shutdown); runs are marked cancelled by the agent."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._log is not None:
            await self._log.close()
