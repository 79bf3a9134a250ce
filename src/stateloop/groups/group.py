"""A group: its members, the blocks shared with all of them, the group's own view of the
conversation (kept in the store when the members are), and a run that streams every member's
events tagged with the member that produced them.

A manager type (``round_robin.py``, ``supervisor.py``, ``dynamic.py``) only decides who
speaks and when the group stops; each member's turn is a real run of that member (its queue,
its memory, its stop reasons).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..agent_options import as_messages
from ..errors import ConfigError
from ..messages import Message, user
from ..persistence import block_record
from ..store.errors import NotFoundError
from ..store.records import GroupMessage, GroupRecord
from .base import GroupEvent, GroupResult, Manager, MemberFailed, Session
from .dynamic import Dynamic
from .round_robin import RoundRobin
from .supervisor import Supervisor

if TYPE_CHECKING:
    from ..agent import Agent
    from ..memory.blocks import Block
    from ..store.sql import SqlStore


def manager_from_record(record: GroupRecord, manager: Agent | None) -> Any:
    """The manager type a stored group names, with its manager agent."""
    kind = record.manager_type
    if kind == "round_robin":
        return RoundRobin(record.max_turns)
    if manager is None:
        raise ConfigError(f"group {record.id!r} ({kind}) has no manager agent")
    if kind == "supervisor":
        return Supervisor(manager)
    if kind == "dynamic":
        return Dynamic(manager, record.termination_token or "DONE!", record.max_turns)
    raise ConfigError(f"group {record.id!r} is a {kind!r} group, which does not run here")


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
    try:
        await store.get_block(block_id)
    except NotFoundError:
        return False
    return True
