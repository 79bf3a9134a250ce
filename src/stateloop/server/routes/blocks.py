"""Core memory: an agent's blocks by label, and shared blocks under ``/v1/blocks``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ...store import BlockRecord, Page
from ..deps import RuntimeDep
from ..models.requests import BlockUpdate, CreateBlock, errors
from ..models.responses import AgentState, Block
from ..pagination import Limit, Order
from ..services.sleeptime import share_block
from ..services.unreadable import readable
from ..services.views import block_view
from .agents import agent_record, agent_state

router = APIRouter(tags=["blocks"])


def _changes(body: BlockUpdate) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True, exclude_none=True)
    if "metadata" in body.model_fields_set:
        changes["metadata"] = body.metadata or {}
    return changes


@router.get("/v1/agents/{agent_id}/core-memory/blocks",
            responses=errors(404), response_model=list[Block])
async def list_agent_blocks(agent_id: str, runtime: RuntimeDep, after: str | None = None,
                            before: str | None = None,
                            limit: Limit = None,
                            order: Order = "asc") -> list[dict[str, Any]]:
    """The agent's blocks in order."""
    await agent_record(runtime, agent_id)
    blocks = await runtime.store.list_blocks(
        agent_id, page=Page(after=after, before=before, limit=limit, order=order))
    return [readable(Block, block_view(b)) for b in blocks]


@router.patch("/v1/agents/{agent_id}/core-memory/blocks/attach/{block_id}",
              responses=errors(404, 409), response_model=AgentState)
async def attach_block(agent_id: str, block_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Share an existing block with the agent (and its memory agent, if it has one); one
    attached already stays as it is, as in Letta."""
    await agent_record(runtime, agent_id)
    await runtime.store.get_block(block_id)
    if block_id not in {b.id for b in await runtime.store.list_blocks(agent_id)}:
        await runtime.store.attach_block(agent_id, block_id)
    await share_block(runtime, agent_id, block_id)
    return await agent_state(runtime, await runtime.store.get_agent(agent_id))


@router.patch("/v1/agents/{agent_id}/core-memory/blocks/detach/{block_id}",
              responses=errors(404), response_model=AgentState)
async def detach_block(agent_id: str, block_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Unlink a block from the agent (the block stays)."""
    await agent_record(runtime, agent_id)
    await runtime.store.detach_block(agent_id, block_id)
    return await agent_state(runtime, await runtime.store.get_agent(agent_id))


# A label is a path (``skills/pdf``): matched after attach/detach, which take block ids.
@router.get("/v1/agents/{agent_id}/core-memory/blocks/{block_label:path}",
            responses=errors(404), response_model=Block)
async def retrieve_agent_block(agent_id: str, block_label: str,
                               runtime: RuntimeDep) -> dict[str, Any]:
    """The agent's block with this label."""
    await agent_record(runtime, agent_id)
    return block_view(await runtime.store.get_agent_block(agent_id, block_label))


@router.patch("/v1/agents/{agent_id}/core-memory/blocks/{block_label:path}",
              responses=errors(404, 409), response_model=Block)
async def modify_agent_block(agent_id: str, block_label: str, body: BlockUpdate,
                             runtime: RuntimeDep) -> dict[str, Any]:
    """Edit the agent's block with this label (value over the limit: 422, nothing changes).

    A live agent picks the edit up before its next step (the store's change token)."""
    await agent_record(runtime, agent_id)
    # By id: the body may rename the block ("label"), which the by-label update cannot take.
    block = await runtime.store.get_agent_block(agent_id, block_label)
    return block_view(await runtime.store.update_block(block.id, **_changes(body)))


@router.post("/v1/blocks", response_model=Block)
async def create_block(body: CreateBlock, runtime: RuntimeDep) -> dict[str, Any]:
    """A standalone block, to attach to agents later."""
    record = BlockRecord(label=body.label, value=body.value, description=body.description,
                         read_only=body.read_only, metadata=body.metadata or {},
                         hidden=body.hidden,
                         preserve_on_migration=bool(body.preserve_on_migration))
    if body.limit is not None:
        record.limit = body.limit
    return block_view(await runtime.store.create_block(record))


@router.get("/v1/blocks", response_model=list[Block])
async def list_blocks(runtime: RuntimeDep, label: str | None = None, after: str | None = None,
                      before: str | None = None,
                      limit: Limit = 50,
                      order: Order = "asc",
                      identity_id: str | None = None,
                      identifier_keys: Annotated[list[str] | None, Query()] = None,
                      ) -> list[dict[str, Any]]:
    """Every block, optionally only those with this label, or of these identities."""
    blocks = await runtime.store.list_blocks(
        label=label, identity_id=identity_id, identifier_keys=identifier_keys,
        page=Page(after=after, before=before, limit=limit, order=order))
    return [readable(Block, block_view(b)) for b in blocks]


@router.get("/v1/blocks/{block_id}", responses=errors(404), response_model=Block)
async def retrieve_block(block_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """One block."""
    return block_view(await runtime.store.get_block(block_id))


@router.patch("/v1/blocks/{block_id}", responses=errors(404, 409), response_model=Block)
async def modify_block(block_id: str, body: BlockUpdate, runtime: RuntimeDep) -> dict[str, Any]:
    """Edit a block; every agent sharing it sees the change at its next step."""
    return block_view(await runtime.store.update_block(block_id, **_changes(body)))


@router.delete("/v1/blocks/{block_id}", responses=errors(404))
async def delete_block(block_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Delete a block everywhere it is attached."""
    await runtime.store.delete_block(block_id)
    return {}
