"""``Conversation``: one thread of an agent besides its default one.

A conversation is the agent in another thread: it runs with the agent's settings (the same
``AgentSettings``: model, tools, rules, system prompt...), blocks and archival memory, read
as they are now, and keeps
its own transcript, in-context list, compaction, pending approvals, steering and run lock, so
two conversations of one agent run at the same time. Blocks named in
``isolated_block_labels`` are copies of its own. Its messages are stored with its id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .agent_memory import MemorySettings, ThreadMemory
from .agent_runs import AgentRuns
from .agent_settings import own_setting
from .agent_store import StoredSettings, ThreadStorage
from .agent_threads import history
from .approvals import PendingApproval
from .errors import ConfigError
from .llm.tokens import message_tokens
from .memory.blocks import Block
from .messages import Message, new_id
from .persistence import Persistence, block_from_record, block_record, run_blocking
from .store.records import ConversationRecord, new_record_id

if TYPE_CHECKING:
    from .agent import Agent
    from .llm.base import Model, ModelSettings
    from .memory.archival import ArchivalMemory
    from .memory.embeddings import Embedder
    from .sleeptime import Sleeptime
    from .thread_state import ThreadState


class Conversation(AgentRuns):
    """A thread of ``agent``: ``run``, ``run_sync``, ``stream``, ``steer``, ``cancel``,
    ``compact``, ``context_overview`` as on the agent. ``id`` and ``name`` are the agent's;
    ``conversation_id`` is this thread's."""

    def __init__(self, agent: Agent, conversation_id: str, *, summary: str | None,
                 isolated: list[Block], model: str | Model | None = None,
                 created_at: float | None = None) -> None:
        self._agent = agent
        self.settings = agent.settings  # the agent's own object: its changes reach here
        self.own_settings: dict[str, Any] = {}  # set here, over the agent's (own_setting)
        self.conversation_id = self.key = conversation_id
        self.summary = summary
        self._isolated = {block.label: block for block in isolated}
        self._own_model = model
        self._model = agent.settings.resolve(model) if model is not None else None
        self._recall_count: int | None = None  # None: the agent's, until this one counts
        self._archival_count: int | None = None
        self._init_thread(agent.state.steering.delivery)

    # What a conversation may set for itself (Letta's conversation ``model_settings``).
    max_tokens: own_setting[int | None] = own_setting()
    parallel_tool_calls: own_setting[bool] = own_setting()
    model_settings: own_setting[ModelSettings] = own_setting()

    @property
    def agent(self) -> Agent:
        """The agent whose thread this is."""
        return self._agent

    @property
    def model(self) -> Model:
        """The conversation's own model, else the agent's."""
        return self._model or self.settings.model

    @model.setter
    def model(self, model: str | Model) -> None:
        self._model = self.settings.resolve(model)

    @property
    def sleeptime(self) -> Sleeptime | None:
        """The agent's memory agent: a turn of any of its threads counts."""
        return self._agent.sleeptime

    @sleeptime.setter
    def sleeptime(self, sleeptime: Sleeptime | None) -> None:
        raise AttributeError("the memory agent is the agent's: set it on the agent")

    @property
    def recall_count(self) -> int:
        """Messages stored so far: the agent's, until this thread is read from the store or
        runs."""
        return self._agent.recall_count if self._recall_count is None else self._recall_count

    @recall_count.setter
    def recall_count(self, count: int) -> None:
        self._recall_count = count

    @property
    def archival_count(self) -> int:
        """Passages stored so far: the agent's, until this thread counts its own."""
        return (self._agent.archival_count if self._archival_count is None
                else self._archival_count)

    @archival_count.setter
    def archival_count(self, count: int) -> None:
        self._archival_count = count

    @property
    def embedder(self) -> Embedder | None:
        return self._agent.embedder

    def archival(self) -> ArchivalMemory:
        """The agent's archival memory."""
        return self._agent.archival()

    @property
    def blocks(self) -> list[Block]:
        """The agent's blocks, with this conversation's copies in place of isolated ones."""
        return [self._isolated.get(block.label, block) for block in self._agent.blocks]

    @blocks.setter
    def blocks(self, blocks: list[Block]) -> None:
        for block in blocks:  # shared ones are the agent's to set
            if block.label in self._isolated:
                self._isolated[block.label] = block

    def _memory(self, state: ThreadState) -> ThreadMemory:
        return ConversationMemory(self, state, self._agent, self._isolated)

    def _storage(self, state: ThreadState) -> ThreadStorage:
        return ConversationStorage(self, state, self.memory, self.key)

    def fork(self, up_to: str | None = None, *, summary: str | None = None) -> Conversation:
        """A new conversation of the agent that starts from copies of this one's in-context
        messages through ``up_to``, with its isolated blocks and model."""
        return fork(self, up_to, summary=summary)

    async def afork(self, up_to: str | None = None, *,
                    summary: str | None = None) -> Conversation:
        """``fork`` for async code."""
        return await afork(self, up_to, summary=summary)

    @classmethod
    def new(cls, agent: Agent, *, summary: str | None = None,
            isolated_block_labels: list[str] | None = None, history: Sequence[Message] = (),
            model: str | Model | None = None, conversation_id: str | None = None
            ) -> Conversation:
        """A conversation in memory, starting from copies of ``history`` (new ids)."""
        labels = list(isolated_block_labels or ())
        known = {block.label: block for block in agent.blocks}
        missing = [label for label in labels if label not in known]
        if missing:
            raise ConfigError(f"agent {agent.name!r} has no blocks labelled {missing}; "
                              f"it has {sorted(known)}")
        isolated = [dataclasses.replace(known[label], id=new_id("block")) for label in labels]
        conversation = cls(agent, conversation_id or new_record_id("conv"), summary=summary,
                           isolated=isolated, model=model)
        conversation.state.transcript.extend(dataclasses.replace(m, id=new_id("message"))
                                        for m in history)
        conversation.storage.repair(None)  # a fork cut inside a step: its open calls are answered
        return conversation

    @classmethod
    async def start(cls, agent: Agent, *, summary: str | None = None,
                    isolated_block_labels: list[str] | None = None,
                    history: Sequence[Message] = (), model: str | Model | None = None
                    ) -> Conversation:
        """``new``, then stored (with its isolated blocks) when the agent is."""
        conversation = cls.new(agent, summary=summary, model=model, history=history,
                               isolated_block_labels=isolated_block_labels)
        persist = agent.state.persist
        if persist is not None:
            transcript = conversation.state.transcript
            for message in transcript:
                message_tokens(message, conversation.model.name)
            record = ConversationRecord(
                agent.id, conversation.key, summary=summary,
                model=conversation.model.name if model is not None else None)
            await persist.store.create_conversation(
                record, [block_record(b) for b in conversation._isolated.values()],
                transcript)
            conversation.state.persist = Persistence(persist.store, agent.id, conversation.key,
                                                list(transcript))
        agent._conversations[conversation.key] = conversation
        return conversation

    @classmethod
    async def open_stored(cls, agent: Agent, conversation_id: str) -> Conversation:
        """A stored conversation of ``agent``, as the store holds it."""
        assert agent.state.persist is not None
        store = agent.state.persist.store
        record = await store.get_conversation(conversation_id)
        if record.agent_id != agent.id:
            raise ConfigError(f"conversation {conversation_id!r} is not agent "
                              f"{agent.name!r}'s")
        isolated = [block_from_record(await store.get_block(i))
                    for i in record.isolated_block_ids]
        conversation = cls(agent, record.id, summary=record.summary, isolated=isolated,
                           model=record.model)
        conversation.state.persist = Persistence(store, agent.id, record.id)
        await conversation.storage.use_stored(*await _stored(conversation.state.persist,
                                                              record))
        agent._conversations[record.id] = conversation
        return conversation



class ConversationStorage(ThreadStorage):
    """A conversation's storage: it goes back to its own record after a failed write."""

    def __init__(self, thread: StoredSettings, state: ThreadState, memory: ThreadMemory,
                 key: str) -> None:
        super().__init__(thread, state, memory)
        self.key = key

    async def reload(self) -> None:
        """Go back to what the store holds (after a write failed)."""
        persist = self.state.persist
        assert persist is not None
        record = await persist.store.get_conversation(self.key)
        await self.memory.sync_blocks()
        await self.use_stored(*await _stored(persist, record))
        self.state.stale = False


class ConversationMemory(ThreadMemory):
    """A conversation's memory: the agent's shared blocks and its own isolated ones, each
    kept in step with the store."""

    def __init__(self, settings: MemorySettings, state: ThreadState, agent: Agent,
                 isolated: dict[str, Block]) -> None:
        super().__init__(settings, state)
        self.agent = agent
        self.isolated = isolated

    async def sync_blocks(self) -> None:
        persist = self.state.persist
        assert persist is not None
        await persist.sync_blocks(self.agent.blocks)
        for label, block in self.isolated.items():
            stored = await persist.store.get_block(block.id)
            if stored.value != block.value:
                block.value = stored.value
            self.isolated[label] = block
        self.refresh()


async def _stored(persist: Persistence, record: ConversationRecord
                  ) -> tuple[list[Message], PendingApproval | None]:
    messages = await persist.store.get_messages(record.in_context_message_ids)
    pending = (PendingApproval.from_dict(record.pending_approval)
               if record.pending_approval else None)
    return messages, pending


def in_memory(agent: Agent, summary: str | None, labels: list[str],
              model: str | Model | None, history: list[Message]) -> Conversation:
    """A new conversation of an agent without a store, kept by the agent."""
    conversation = Conversation.new(agent, summary=summary, model=model, history=history,
                                    isolated_block_labels=labels)
    agent._conversations[conversation.key] = conversation
    return conversation


def fork(thread: Agent | Conversation, up_to: str | None, *,
         summary: str | None) -> Conversation:
    """A new conversation of ``thread``'s agent that starts from copies of ``thread``'s
    in-context messages through ``up_to``, with its isolated blocks and model."""
    agent = thread.agent
    if agent.state.persist is None:
        return in_memory(agent, summary, list(getattr(thread, "_isolated", {})),
                         getattr(thread, "_own_model", None),
                         history(thread.state.transcript, up_to))
    return run_blocking(lambda: afork(thread, up_to, summary=summary))


async def afork(thread: Agent | Conversation, up_to: str | None, *,
                summary: str | None) -> Conversation:
    """``fork`` for async code."""
    return await Conversation.start(
        thread.agent, summary=summary, history=history(thread.state.transcript, up_to),
        isolated_block_labels=list(getattr(thread, "_isolated", {})),
        model=getattr(thread, "_own_model", None))
