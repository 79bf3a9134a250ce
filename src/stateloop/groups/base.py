"""What every group shares: its members, the blocks shared with all of them, the group's own
view of the conversation (kept in the store when the members are), and a run that streams
every member's events tagged with the member that produced them.

A manager type (``round_robin.py``, ``supervisor.py``, ``dynamic.py``) only decides who
speaks and when the group stops; each member's turn is a real run of that member (its queue,
its memory, its stop reasons).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigError
from ..events import AnyEvent, RunEnd
from ..messages import Message, user
from ..store.groups import GroupMessage, GroupRecord

if TYPE_CHECKING:
    from ..agent import Agent
    from ..memory.blocks import Block
    from ..store.sql import SqlStore
    from ..tools import Tool


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


class Group:
    """Agents that talk as one conversation, under a manager type.

    ``Group([a, b], manager=RoundRobin(max_turns=4), shared_blocks=[block])``; then
    ``await group.run("...")`` or ``async for event in group.stream("...")`` (each a
    ``GroupEvent`` naming its agent). With persisted agents, ``await Group.acreate(...,
    store=...)`` stores it and ``Group.aload(id, store=...)`` brings it back.
    """

    def __init__(self, agents: Iterable[Agent], *, manager: Manager | None = None,
                 description: str = "", shared_blocks: Iterable[Block] = (),
                 id: str | None = None) -> None:
        from .round_robin import RoundRobin

        self.agents = list(agents)
        if not self.agents:
            raise ConfigError("a group needs at least one agent")
        ids = [agent.id for agent in self.agents]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"a group's agents must differ; got {ids}")
        self.manager: Manager = manager or RoundRobin()
        if any(m.id in ids for m in self.manager.agents()):
            raise ConfigError("a group's manager agent cannot also be a member")
        self.description = description
        self.shared_blocks = list(shared_blocks)
        self.record = GroupRecord(self.manager.manager_type, ids, description,
                                  **self.manager.record_fields())
        if id is not None:
            self.record.id = id
        self.messages: list[GroupMessage] = []
        self.last_result: GroupResult | None = None
        self._store: SqlStore | None = None
        for block in self.shared_blocks:
            self._share_live(block)

    @property
    def id(self) -> str:
        return self.record.id

    def everyone(self) -> list[Agent]:
        return [*self.agents, *self.manager.agents()]

    def member(self, agent_id: str) -> Agent:
        for agent in self.everyone():
            if agent.id == agent_id:
                return agent
        raise KeyError(agent_id)

    # -- the store -----------------------------------------------------------------------

    @classmethod
    async def acreate(cls, agents: Iterable[Agent], *, store: SqlStore,
                      **options: Any) -> Group:
        """A group whose members live in ``store``, stored there too."""
        group = cls(agents, **options)
        group._store = store
        from ..persistence import block_record

        for block in group.shared_blocks:
            if block.id is None or not await _block_exists(store, block.id):
                stored = await store.create_block(block_record(block))
                block.id = stored.id
        group.record.shared_block_ids = [b.id for b in group.shared_blocks if b.id]
        group.record = await store.create_group(group.record)
        return group

    @classmethod
    async def aload(cls, group_id: str, *, store: SqlStore,
                    load_agent: Callable[[str], Awaitable[Agent]]) -> Group:
        """The stored group, its agents from ``load_agent(agent_id)`` (``Agent.aload`` with
        the tools and model they need, or a server's live agents)."""
        record = await store.get_group(group_id)
        members = [await load_agent(agent_id) for agent_id in record.agent_ids]
        manager_agent = (await load_agent(record.manager_agent_id)
                         if record.manager_agent_id else None)
        from . import manager_from_record

        group = cls(members, manager=manager_from_record(record, manager_agent),
                    description=record.description, id=record.id)
        group.record = record
        group._store = store
        group.messages = await store.list_group_messages(group_id)
        return group

    async def add_messages(self, messages: Sequence[GroupMessage]) -> None:
        if self._store is not None and messages:
            await self._store.append_group_messages(self.id, messages)  # numbers them
        else:
            last = self.messages[-1].seq if self.messages else 0
            for offset, message in enumerate(messages, 1):
                message.seq = last + offset
        self.messages.extend(messages)

    def unseen(self, agent: Agent) -> list[Message]:
        """What the group said since ``agent`` last spoke, as its next run's input."""
        after = self.record.cursors.get(agent.id, 0)
        return [_as_input(m) for m in self.messages if m.seq > after and m.sender_id != agent.id]

    def last_seq(self) -> int:
        return self.messages[-1].seq if self.messages else 0

    def seen(self, agent: Agent, upto: int) -> None:
        """``agent`` was given the group's messages up to ``upto`` (its own need no telling)."""
        self.record.cursors[agent.id] = upto

    def _share_live(self, block: Block) -> None:
        """Give every member the block, checked for all before any is changed."""
        lacking = [agent for agent in self.everyone()
                   if not any(b is block or b.id == block.id for b in agent.blocks)]
        for agent in lacking:
            if any(b.label == block.label for b in agent.blocks):
                raise ConfigError(f"agent {agent.name!r} already has a block labelled "
                                  f"{block.label!r}; a shared block needs a free label")
        for agent in lacking:
            agent.blocks.append(block)
            agent.memory_changed()

    # -- running -------------------------------------------------------------------------

    async def run(self, input: str | Message | list[Message]) -> GroupResult:
        """Run the group on ``input`` until its manager type stops it."""
        session = self._session(input)
        async for _ in self._drive(session):
            pass
        return self._result(session)

    async def stream(self, input: str | Message | list[Message]) -> AsyncIterator[GroupEvent]:
        """Run the group, yielding every member's events tagged with its agent."""
        async for event in self._drive(self._session(input)):
            yield event

    def _session(self, input: str | Message | list[Message]) -> Session:
        from ..agent_options import as_messages

        return Session(self, as_messages(input))

    async def _drive(self, session: Session) -> AsyncIterator[GroupEvent]:
        await session.say([GroupMessage("user", m.text) for m in session.input])

        async def drive() -> None:
            try:
                await self.manager.drive(session)
            except MemberFailed as exc:
                session.stop_reason, session.error = "error", str(exc)
            finally:
                session.events.put_nowait(None)

        task = asyncio.create_task(drive())
        try:
            while (event := await session.events.get()) is not None:
                yield event
            await task
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            if self._store is not None:  # who has seen what, for the next run
                await self._store.append_group_messages(self.id, [], dict(self.record.cursors))
        self.last_result = self._result(session)

    def _result(self, session: Session) -> GroupResult:
        return GroupResult(session.added, session.stop_reason, session.turns, session.error,
                           session.runs)


def _as_input(message: GroupMessage) -> Message:
    text = message.text if message.sender_id is None else f"{message.name}: {message.text}"
    input = user(text)
    if message.sender_id is not None:
        input.metadata = {"sender_id": message.sender_id, "group_message_id": message.id}
    return input


async def _block_exists(store: SqlStore, block_id: str) -> bool:
    from ..store.errors import NotFoundError

    try:
        await store.get_block(block_id)
    except NotFoundError:
        return False
    return True
