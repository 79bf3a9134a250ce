"""What a manager type drives: one group run (``Session``), its tagged events, its result,
and the ``Manager`` protocol that ``round_robin.py``, ``supervisor.py`` and ``dynamic.py``
implement (``group.py`` holds the group itself)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..events import AnyEvent, RunEnd
from ..messages import Message
from ..store.records import GroupMessage

if TYPE_CHECKING:
    from ..agent import Agent
    from ..tools import Tool
    from .group import Group


@dataclass(slots=True)
class GroupEvent:
    """A member's event during a group run, tagged with the member that produced it."""

    agent_id: str
    agent_name: str
    event: AnyEvent

    @property
    def type(self) -> str:
        return self.event.type


@dataclass(slots=True)
class GroupResult:
    """How a group run went: the messages it added to the group's view, and why it ended
    (``end_turn``: the manager or a termination token ended it; ``max_turns``: the turns
    ran out; ``error``: a member's run failed, named in ``error``)."""

    messages: list[GroupMessage]
    stop_reason: str
    turns: int
    error: str | None = None
    runs: list[RunEnd] = field(default_factory=list)


class Manager(Protocol):
    """A manager type: drives one group run through ``session``."""

    manager_type: str

    def agents(self) -> list[Agent]: ...
    async def drive(self, session: Session) -> None: ...
    def record_fields(self) -> dict[str, Any]: ...


GOOD_STOPS = frozenset({"end_turn", "max_steps", "tool_rule"})  # a turn that said its piece


class MemberFailed(Exception):
    """A member's run stopped with an error; the group run ends with ``error``."""


class Session:
    """One group run: the queue of tagged events, the messages added, the turns taken."""

    def __init__(self, group: Group, input: list[Message]) -> None:
        self.group = group
        self.input = input
        self.events: asyncio.Queue[GroupEvent | None] = asyncio.Queue()
        self.added: list[GroupMessage] = []
        self.runs: list[RunEnd] = []
        self.turns = 0
        self.stop_reason = "end_turn"
        self.error: str | None = None

    async def say(self, messages: Sequence[GroupMessage]) -> None:
        """Add messages to the group's view (and the store's)."""
        await self.group.add_messages(messages)
        self.added.extend(messages)

    async def turn(self, agent: Agent, input: list[Message],
                   tools: Sequence[Tool] = ()) -> RunEnd:
        """One real run of ``agent`` on ``input``, its events forwarded tagged; ``tools``
        are offered for this run only."""
        end: RunEnd | None = None
        async for event in agent.stream(input, tools=tools):
            await self.events.put(GroupEvent(agent.id, agent.name, event))
            if isinstance(event, RunEnd):
                end = event
        assert end is not None
        self.runs.append(end)
        if end.stop_reason not in GOOD_STOPS:
            raise MemberFailed(f"agent {agent.name!r} ({agent.id}) stopped with "
                               f"{end.stop_reason}: {end.error or 'no reply'}")
        return end

    async def member_turn(self, agent: Agent) -> RunEnd:
        """A member speaks: it is given what was said since its last turn, and its reply
        joins the group's view."""
        upto = self.group.last_seq()
        end = await self.turn(agent, self.group.unseen(agent))
        self.group.seen(agent, upto)
        reply = [GroupMessage("assistant", end.output, sender_id=agent.id, name=agent.name,
                              run_id=end.run_id)] if end.output else []
        await self.say(reply)
        self.turns += 1
        return end
