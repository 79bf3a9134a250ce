"""Sleep-time memory agents: a companion agent that reorganises the main agent's memory in
the background.

``Agent(enable_sleeptime=True)`` makes a memory agent (type ``sleeptime_agent``) that shares
the main agent's core blocks. Every ``frequency`` turns of the main agent, once its run has
ended, the memory agent runs as a background task on the main agent's messages since it last
ran, with memory tools only; its edits reach the main agent through the shared blocks (read
again before each step). The pair is Letta's sleeptime group: a ``sleeptime`` group managed
by the main agent with the memory agent as its member, whose record keeps the frequency, the
turn counter and the last message processed (in memory for an agent without a store). This
module owns that link, the transcript the memory agent is given, and the background runs:
at most one at a time per main agent, a failure recorded on the memory agent's run and
logged, never raised into the main agent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .events import RunEnd, RunStart
from .live_agents import live_agents_of
from .memory.blocks import Block
from .memory.sleeptime_prompt import PERSONA, REMINDER, SYSTEM_PROMPT, transcript
from .messages import Message, new_id
from .persistence import run_status
from .store.errors import NotFoundError
from .store.records import GroupRecord
from .tools.builtin import MEMORY_EDITS

if TYPE_CHECKING:
    from .agent import Agent
    from .agent_types import AgentType
    from .llm.base import Model
    from .store.records import AgentRecord
    from .store.sql import SqlStore

logger = logging.getLogger("stateloop")

MANAGER_TYPE = "sleeptime"  # the group's manager type
DEFAULT_FREQUENCY = 5  # Letta's sleeptime_agent_frequency for a new sleeptime group
MEMORY_AGENT_TYPE = "sleeptime_agent"
FINISH_RULE = {"type": "exit_loop", "tool_name": "memory_finish_edits"}


@dataclass(slots=True)
class SleeptimeLink:
    """The main agent's side of its sleeptime group."""

    group_id: str
    memory_agent_id: str
    frequency: int = DEFAULT_FREQUENCY
    turns_counter: int = 0
    last_processed_message_id: str | None = None

    @classmethod
    def from_group(cls, group: GroupRecord) -> SleeptimeLink | None:
        """The link a stored sleeptime group describes (None without a member). As in
        Letta, a group without a frequency runs its memory agent after every turn."""
        if not group.agent_ids:
            return None
        return cls(group.id, group.agent_ids[0], group.sleeptime_agent_frequency or 1,
                   group.turns_counter or 0, group.last_processed_message_id)


async def stored_link(db: SqlStore, main_id: str) -> SleeptimeLink | None:
    """The link of the sleeptime group the agent manages, if it has one."""
    return link_of(await db.managed_group(main_id))


def link_of(group: GroupRecord | None) -> SleeptimeLink | None:
    """The link of ``group`` (the one an agent manages) if it is a sleeptime group."""
    if group is None or group.manager_type != MANAGER_TYPE:
        return None
    return SleeptimeLink.from_group(group)


def check_frequency(frequency: int) -> int:
    if type(frequency) is not int or frequency < 1:
        raise ConfigError(f"sleeptime_agent_frequency must be a positive integer, "
                          f"got {frequency!r}")
    return frequency


def wanted(enable: bool, frequency: int) -> int:
    """The memory agent's frequency when one is asked for, else 0."""
    return check_frequency(frequency) if enable else 0


def main_memory_tools(preset: AgentType, enable_sleeptime: bool) -> list[str]:
    """The preset's memory tools for a main agent: with a memory agent, editing memory is
    its job, so the main agent keeps only the tools that read (as in Letta)."""
    return [name for name in preset.memory_tools
            if not (enable_sleeptime and name in MEMORY_EDITS)]


def memory_agent_settings(name: str, blocks: list[Block], *, stored: bool) -> dict[str, Any]:
    """``Agent`` arguments of a new memory agent sharing ``blocks`` (as Letta makes one: a
    ``memory_persona`` block of its own, memory tools, no opening messages); a stored one
    can also file facts in archival memory."""
    return {"name": f"{name}-sleeptime", "agent_type": MEMORY_AGENT_TYPE,
            "tools": ["archival_memory_insert"] if stored else [],
            "system": SYSTEM_PROMPT, "tool_rules": [FINISH_RULE],
            "blocks": [Block("memory_persona", PERSONA,
                             "How this memory agent manages memory"), *blocks]}


async def create_memory_agent(kind: type[Agent], db: SqlStore, main_id: str,
                              model: str | Model, *, frequency: int = DEFAULT_FREQUENCY,
                              **options: Any) -> tuple[SleeptimeLink, Agent]:
    """Store a memory agent (of class ``kind``) sharing the main agent's blocks, and the
    sleeptime group that links the two; ``options`` go to ``kind`` (endpoint, embedder)."""
    check_frequency(frequency)
    record = await db.get_agent(main_id)
    settings = memory_agent_settings(record.name, [], stored=True)
    settings["name"] = await _free_name(db, settings["name"])  # stored names are unique
    memory = await kind.acreate(model, store=db, **settings, **options)
    group: GroupRecord | None = None
    try:
        for block in await db.list_blocks(main_id):
            await db.attach_block(memory.id, block.id)
        group = await db.create_group(GroupRecord(
            MANAGER_TYPE, [memory.id], manager_agent_id=main_id,
            sleeptime_agent_frequency=frequency, turns_counter=0))
        await db.update_agent(main_id, enable_sleeptime=True)
        await memory.recompile()  # its prompt shows the shared blocks
    except BaseException:
        if group is not None:
            await db.delete_group(group.id)
        await db.delete_agent(memory.id, delete_orphan_blocks=True)
        raise
    return SleeptimeLink(group.id, memory.id, frequency), memory


async def _free_name(db: SqlStore, name: str) -> str:
    for suffix in ("", *(f"-{n}" for n in range(2, 1000))):
        try:
            await db.get_agent(name + suffix)
        except NotFoundError:
            return name + suffix
    return name


Loader = Callable[[str], Awaitable["Agent"]]


class Sleeptime:
    """One main agent's memory agent and its background runs.

    ``after_turn`` (called as each of the main agent's runs ends) counts turns and starts a
    memory run when one is due; ``wait`` awaits the runs in flight; ``close`` stops them.
    ``model`` replaces the memory agent's own model for its runs; ``loader`` brings the
    memory agent back by id (the server hands out its one live agent per id); without one,
    the main agent's live agents load it (``stateloop.live_agents``)."""

    def __init__(self, main: Agent, link: SleeptimeLink, memory: Agent | None = None, *,
                 enabled: bool = True) -> None:
        self.main = main
        self.link = link
        self.enabled = enabled
        self.model: Model | None = None
        self.loader: Loader | None = None
        self.last_result: RunEnd | None = None  # the last memory run's end
        self.last_error: str | None = None  # why the last memory run failed, if it did
        self._memory = memory
        self._task: asyncio.Task[None] | None = None
        self._due: str | None = None  # a run is due, covering messages up to this id
        self._saving: asyncio.Task[None] | None = None

    @classmethod
    def in_memory(cls, main: Agent, frequency: int) -> Sleeptime | None:
        """For an agent without a store (None unless it asked for one, with the
        ``frequency`` of ``wanted``): the memory agent holds the main agent's very blocks."""
        if not frequency:
            return None
        memory = type(main)(main.model,
                            **memory_agent_settings(main.name, main.blocks, stored=False))
        return cls(main, SleeptimeLink(new_id("group"), memory.id, frequency),
                   memory)

    @classmethod
    async def create(cls, main: Agent, frequency: int) -> Sleeptime:
        """For a stored agent: store a memory agent sharing its blocks, and the link."""
        assert main.store is not None
        link, memory = await create_memory_agent(type(main), main.store, main.id, main.model,
                                                 frequency=frequency, embedder=main.embedder,
                                                 embedders=main.embedders,
                                                 **main.settings.model_options)
        return cls(main, link, memory)

    @classmethod
    def stored(cls, main: Agent, record: AgentRecord, group: GroupRecord | None
               ) -> Sleeptime | None:
        """A loaded agent's sleeptime group, if ``group`` (the one it manages) is one (idle
        while ``enable_sleeptime`` is off)."""
        link = link_of(group)
        return cls(main, link, enabled=record.enable_sleeptime) if link is not None else None

    def follow(self, stored: SleeptimeLink) -> None:
        """Take the frequency and member of the group as stored (changed over REST, say);
        a run in flight goes on with the member it has."""
        self.link.frequency = stored.frequency
        if stored.memory_agent_id != self.link.memory_agent_id:
            self.link.memory_agent_id = stored.memory_agent_id
            self._memory = None  # loaded on its next run

    async def reread(self) -> None:
        """Take the turn counter and the last message processed as stored: another process
        ran turns of the main agent (store/fleet.py)."""
        assert self.main.store is not None
        stored = await stored_link(self.main.store, self.main.id)
        if stored is not None and not self.running:
            self.link.turns_counter = stored.turns_counter
            self.link.last_processed_message_id = stored.last_processed_message_id
            self.follow(stored)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def busy(self) -> bool:
        """A memory run in flight, or the link's counters being written."""
        return self.running or (self._saving is not None and not self._saving.done())

    async def memory_agent(self) -> Agent:
        """The memory agent, loaded on first use; with a ``loader``, the one it hands out
        now (the server may have let an idle one go since the last run)."""
        if self.loader is not None:
            return await self.loader(self.link.memory_agent_id)
        if self._memory is None:
            self._memory = await (self.loader or self._load)(self.link.memory_agent_id)
        return self._memory

    async def _load(self, agent_id: str) -> Agent:
        """The memory agent read by the main agent's live agents, with its model and
        embedders."""
        main = self.main
        return await live_agents_of(main).load(agent_id, model=main.model,
                                               embedder=main.embedder, embedders=main.embedders,
                                               **main.settings.model_options)

    def after_turn(self, end: RunEnd) -> None:
        """A turn of the main agent ended: count it; past ``frequency`` turns, start a memory
        run in the background (or, if one is in flight, have the next one cover this turn)."""
        if not self.enabled or end.pending_approval is not None:
            return
        link = self.link
        link.turns_counter = (link.turns_counter + 1) % link.frequency
        if link.turns_counter == 0 and end.messages:
            self._due = end.messages[-1].id
            if not self.running:
                self._task = asyncio.get_running_loop().create_task(self._drive())
                return
        if not self.running:
            self._save_soon()

    async def wait(self) -> None:
        """Until no memory run is in flight or due."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
        if self._saving is not None:
            await asyncio.shield(self._saving)

    async def close(self, grace: float = 0.0) -> None:
        """Stop: no memory run starts from now on; one in flight may finish within
        ``grace`` seconds, then it is cancelled (its run is recorded cancelled)."""
        self.enabled = False
        task = self._task
        if task is not None and not task.done():
            if grace > 0:
                await asyncio.wait([task], timeout=grace)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._saving is not None:
            await asyncio.gather(self._saving, return_exceptions=True)

    async def _drive(self) -> None:
        """Memory runs, one after another, until none is due."""
        try:
            while self._due is not None:
                upto, self._due = self._due, None
                await self._run_once(upto)
        finally:
            await self._save()

    async def _run_once(self, upto: str) -> None:
        run_id: str | None = None
        try:
            messages = await self._messages_since(self.link.last_processed_message_id, upto)
            self.link.last_processed_message_id = upto
            if not messages:
                return
            memory = await self.memory_agent()
            async for event in memory.stream(REMINDER + transcript(messages),
                                             model=self.model):
                if isinstance(event, RunStart):
                    run_id = event.run_id
                elif isinstance(event, RunEnd):
                    self.last_result = event
                    failed = run_status(event.stop_reason) == "failed"
                    self.last_error = (event.error or event.stop_reason) if failed else None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the main agent goes on: the failure is recorded, logged
            self.last_error = f"{type(exc).__name__}: {exc}"
            logger.warning("sleeptime run of agent %s failed: %s", self.main.name,
                           self.last_error, exc_info=True)
            await self._record_failure(run_id, self.last_error)

    async def _record_failure(self, run_id: str | None, error: str) -> None:
        store = self.main.store
        if run_id is None or store is None:
            return
        try:  # the run was left as cancelled when it unwound; it failed
            await store.update_run(run_id, status="failed", stop_reason="error", error=error)
        except Exception:
            logger.warning("could not record the failure of run %s", run_id, exc_info=True)

    async def _messages_since(self, after: str | None, upto: str) -> list[Message]:
        """The main agent's messages after ``after`` up to ``upto`` (both ids), oldest first."""
        store = self.main.store
        if store is None:
            every = self.main.recall_messages()
            ids = [m.id for m in every]
            start = ids.index(after) + 1 if after in ids else 0
            end = ids.index(upto) + 1 if upto in ids else len(every)
            return every[start:end]
        found: list[Message] = []
        cursor = after
        while True:
            page = await store.list_messages(self.main.id, after=cursor, limit=500)
            for message in page:
                found.append(message)
                if message.id == upto:
                    return found
            if len(page) < 500:
                return found
            cursor = page[-1].id

    def _save_soon(self) -> None:
        """Store the link (the turn counter moved) in the background, one write at a time."""
        if self.main.store is None or (self._saving is not None and not self._saving.done()):
            return
        self._saving = asyncio.get_running_loop().create_task(self._save())

    async def _save(self) -> None:
        """Store the counter and the last message processed in the group; take its
        frequency and member from there (changed by ``PATCH /v1/groups/{id}``, say). A
        group deleted or given another manager meanwhile turns the memory agent off."""
        store = self.main.store
        if store is None:
            return
        link = self.link
        try:
            group = await store.update_group(
                link.group_id, turns_counter=link.turns_counter,
                last_processed_message_id=link.last_processed_message_id)
        except NotFoundError:
            self.enabled = False
            return
        except Exception:
            logger.warning("could not store the sleeptime group of agent %s", self.main.name,
                           exc_info=True)
            return
        stored = SleeptimeLink.from_group(group)
        if stored is None or group.manager_agent_id != self.main.id:
            self.enabled = False  # no member, or another agent's group now
        else:
            self.follow(stored)
