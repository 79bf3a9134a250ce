"""Changing which blocks a running agent has: a new block, a block let go, a block's new label
or description. Each change is made in the agent (every thread of it sees it at once) and, for
an agent with a store, in the store right away (other agents sharing the block see it at
their next step). Value edits are not here: they go through ``editing.write_block`` and land
with the step."""

from __future__ import annotations

from typing import Any

from ..store.errors import DuplicateError
from ..store.records import BlockRecord
from .blocks import Block


def _own(agent: Any, block: Block) -> list[Block]:
    """The list of blocks ``block`` belongs to: the agent's (a conversation's agent's). A
    conversation's isolated copy is refused: it is that conversation's alone."""
    blocks: list[Block] = agent.agent.blocks
    if not any(b is block for b in blocks):
        raise ValueError(f"memory block {block.label!r} is isolated to this conversation; "
                         f"only its value can be edited here")
    return blocks


def _free(agent: Any, label: str) -> None:
    if any(b.label == label for b in agent.blocks):
        raise ValueError(f"Error: Memory block '{label}' already exists")


async def add_block(agent: Any, label: str, value: str = "",
                    description: str | None = None) -> Block:
    """A new block attached to the agent (its label must be free on the agent)."""
    _free(agent, label)
    block = Block(label, value, description)  # checks the label and the limit
    if agent.store is not None:
        try:
            await agent.store.create_block(
                BlockRecord(label, value, block.limit, block.id, description),
                agent_id=agent.id)
        except DuplicateError as exc:  # another process attached one meanwhile
            raise ValueError(f"Error: Memory block '{label}' already exists") from exc
    agent.agent.blocks.append(block)
    agent.memory_changed(block)
    return block


async def drop_block(agent: Any, block: Block) -> None:
    """Detach the block from the agent; the block itself stays (other agents may share it)."""
    blocks = _own(agent, block)
    if agent.store is not None:
        await agent.store.detach_block(agent.id, block.id)
    blocks.remove(block)
    agent.memory_changed()


async def relabel(agent: Any, block: Block, label: str) -> None:
    """Give the block a new label (for every agent that shares it)."""
    _own(agent, block)
    if label == block.label:
        return
    _free(agent, label)
    Block(label)  # checks the label
    if agent.store is not None:
        try:
            await agent.store.update_block(block.id, label=label)
        except DuplicateError as exc:  # an agent sharing the block has that label
            raise ValueError(f"Error: Memory block {block.label!r} cannot be renamed to "
                             f"{label!r}: {exc}") from exc
    block.label = label
    agent.memory_changed()


async def describe(agent: Any, block: Block, description: str) -> None:
    """Give the block a new description (for every agent that shares it)."""
    _own(agent, block)
    Block(block.label, description=description)  # checks the text
    if agent.store is not None:
        await agent.store.update_block(block.id, description=description)
    block.description = description
    agent.memory_changed()
