"""``Schedules``: messages sent to library agents at a time or on a five-field cron schedule
(UTC), fired by this process while it runs. They are the server's scheduled messages
(``/v1/agents/{id}/schedule``): the same table, the same due times (a recurring one moves to
its next time after it fires, so one missed while nothing ran fires once), the same runs
(each stored with the schedule's id); a server later opened on the database fires them too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .agent import Agent
from .cron import cron_problem, next_time
from .errors import ConfigError
from .events import RunStart
from .messages import Message, assistant, user
from .persistence import get_store
from .scheduler import Scheduler
from .store.history import run_metadata
from .store.records import ScheduleRecord

if TYPE_CHECKING:
    from .store.sql import SqlStore

Load = Callable[[str], Awaitable[Agent]]  # an agent by id, for schedules added elsewhere
MAX_MESSAGES = 100  # messages one schedule sends at most (as over REST)


class Schedules:
    """Scheduled messages for the agents of one store, fired while it is open
    (``async with Schedules(store) as schedules``). Due ones are looked for every
    ``interval`` seconds on ``clock`` (seconds since the epoch; a test may move it and call
    ``tick``). An agent a schedule names is the one given to ``add`` (or in ``agents``),
    else ``load(agent_id)``, else ``Agent.aload`` of the store with no Python tools.

    One process fires a SQLite file's schedules: one a server holds is refused (the server
    fires them), and a second library process would take the first's firings for a stopped
    process's."""

    def __init__(self, store: str | SqlStore, *, agents: Iterable[Agent] = (),
                 load: Load | None = None, interval: float = 1.0,
                 clock: Callable[[], float] = time.time, per_agent: int = 100) -> None:
        self._store_given = store
        self._agents = {agent.id: agent for agent in agents}
        self._load = load
        self.interval = interval
        self._clock = clock
        self.per_agent = per_agent
        self._scheduler: Scheduler | None = None

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        if self._scheduler is not None:
            self._scheduler.clock = clock

    @property
    def store(self) -> SqlStore:
        if self._scheduler is None:
            raise RuntimeError("Schedules is not open: use 'async with Schedules(...)'")
        return self._scheduler.store

    async def __aenter__(self) -> Schedules:
        store = await get_store(self._store_given)
        self._scheduler = Scheduler(store, self._fire, interval=self.interval,
                                    clock=self._clock)
        self._scheduler.start()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        if self._scheduler is not None:
            await self._scheduler.close()  # firings in flight stop with their runs

    async def add(self, agent: Agent, input: str | Sequence[str], *,
                  at: datetime | float | None = None, cron: str | None = None,
                  max_steps: int | None = None) -> ScheduleRecord:
        """Send ``input`` to ``agent`` once ``at`` a time (an aware datetime, or seconds
        since the epoch; one already past fires at once) or on ``cron``, five fields in UTC.
        ValueError for a bad schedule or input, or past ``per_agent`` pending ones."""
        texts = [input] if isinstance(input, str) else list(input)
        if not texts or len(texts) > MAX_MESSAGES or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"input must be a string or 1 to {MAX_MESSAGES} strings")
        if max_steps is not None and (type(max_steps) is not int or max_steps < 1):
            raise ValueError(f"max_steps must be a positive integer, not {max_steps!r}")
        schedule, next_at = self._when(at, cron)
        if agent.store is not self.store:
            raise ConfigError(f"agent {agent.name!r} is not stored in this store: create it "
                              "with store=... (the same one) to schedule its messages")
        request: dict[str, Any] = {"messages": [{"role": "user", "content": text}
                                                for text in texts]}
        if max_steps is not None:
            request["max_steps"] = max_steps
        record = ScheduleRecord(agent_id=agent.id, request=request, schedule=schedule,
                                next_at=next_at)
        await self.store.add_schedule(record, limit=self.per_agent)
        self._agents[agent.id] = agent
        assert self._scheduler is not None
        self._scheduler.wake()
        return record

    def _when(self, at: datetime | float | None, cron: str | None
              ) -> tuple[dict[str, Any], float]:
        """The stored schedule (REST's shape) and when it is first due."""
        if (at is None) == (cron is None):
            raise ValueError("give one of at= (a time) or cron= (a cron expression)")
        if cron is not None:
            problem = cron_problem(cron)
            if problem is not None:
                raise ValueError(f"cron {problem}")
            schedule = {"type": "recurring", "cron_expression": cron}
            following = next_time(schedule, self._clock())
            assert following is not None
            return schedule, following
        if isinstance(at, datetime):
            if at.tzinfo is None:
                raise ValueError("at= must be an aware datetime (e.g. tzinfo=datetime.UTC)")
            seconds = at.timestamp()
        else:
            seconds = float(at)  # type: ignore[arg-type]
        if not math.isfinite(seconds) or not 1e9 <= seconds <= 253402300799:
            raise ValueError(f"at= must be a time in seconds since the epoch, not {at!r}")
        return {"type": "one-time", "scheduled_at": seconds * 1000}, seconds

    async def for_agent(self, agent: Agent | str) -> list[ScheduleRecord]:
        """The agent's scheduled messages, oldest first (a fired one-time one has no
        ``next_at``)."""
        agent_id = agent if isinstance(agent, str) else agent.id
        found: list[ScheduleRecord] = []
        after = None
        while True:
            page, more = await self.store.list_schedules(agent_id, after=after, limit=100)
            found += page
            if not more:
                return found
            after = page[-1].id

    async def delete(self, agent: Agent | str, schedule_id: str) -> bool:
        """Delete a scheduled message: it fires no more. False when the agent has none of
        that id."""
        agent_id = agent if isinstance(agent, str) else agent.id
        return await self.store.delete_schedule(agent_id, schedule_id)

    async def tick(self) -> int:
        """Fire what is due now (by ``clock``); how many were claimed."""
        assert self._scheduler is not None, "Schedules is not open"
        return await self._scheduler.tick()

    async def drain(self) -> None:
        """Wait for the firings started so far to end (their runs included)."""
        assert self._scheduler is not None, "Schedules is not open"
        await self._scheduler.drain()

    async def _agent(self, agent_id: str) -> Agent:
        agent = self._agents.get(agent_id)
        if agent is None:
            if self._load is not None:
                agent = await self._load(agent_id)
            else:
                agent = await Agent.aload(agent_id, store=self.store)
            self._agents[agent_id] = agent
        return agent

    async def _fire(self, record: ScheduleRecord) -> None:
        """Run the agent on the schedule's messages; the run is stored with the schedule's
        id from its first write, and recorded as the schedule's latest once it starts."""
        agent = await self._agent(record.agent_id)
        messages = _messages(record.request)
        due = datetime.fromtimestamp(record.next_at or 0, UTC).isoformat()
        token = run_metadata.set({record.agent_id: {"scheduled_message_id": record.id,
                                                    "scheduled_for": due}})
        try:
            async for event in agent.stream(messages, max_steps=record.request.get("max_steps")):
                if type(event) is RunStart:
                    await self.store.schedule_fired(record.id, event.run_id)
        finally:
            run_metadata.reset(token)


def _messages(request: dict[str, Any]) -> list[Message]:
    """A stored schedule's messages (REST's ``MessageCreate``s) as the agent's input: text
    content only; an assistant's is the assistant's, any other role's the user's."""
    messages = []
    for item in request.get("messages") or []:
        content = item.get("content")
        parts = [content] if isinstance(content, str) else content or []
        texts = []
        for part in parts:
            text = part if isinstance(part, str) else part.get("text")
            if not isinstance(text, str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ValueError(f"a {kind!r} part: the library sends text only")
            texts.append(text)
        text = "\n".join(texts)
        messages.append(assistant(text) if item.get("role") == "assistant" else user(text))
    if not messages:
        raise ValueError("the scheduled message has no messages to send")
    return messages
