"""``/v1/identities`` (create, upsert, list, count, retrieve, modify, properties, delete, an
identity's agents and blocks) and attaching identities to agents and blocks.

Letta's semantics: an ``identifier_key`` is unique within a project (409 otherwise); modify
merges properties by key and links agents and blocks besides those linked, upsert replaces;
deleting an identity leaves its agents and blocks. Unknown ids are 404s and store nothing.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from ...store import IdentityRecord, Page
from ..deps import RuntimeDep
from ..models.requests import IdentityCreate, IdentityProperty, IdentityType, IdentityUpdate, errors
from ..models.requests import IdentityUpsert as IdentityUpsertBody
from ..models.responses import AgentState, Block, Identity
from ..pagination import Limit, Order
from ..services.relationships import EVERY, Included
from ..services.views import block_view, identity_view
from .agents import agent_record, agent_states

router = APIRouter(tags=["identities"])

OrderBy = Literal["created_at"]


def _properties(properties: list[IdentityProperty] | None) -> list[dict[str, Any]]:
    return [prop.model_dump(mode="json") for prop in properties or []]


def _record(body: IdentityCreate) -> IdentityRecord:
    return IdentityRecord(identifier_key=body.identifier_key, name=body.name,
                          identity_type=body.identity_type, project_id=body.project_id,
                          properties=_properties(body.properties),
                          agent_ids=list(body.agent_ids or []),
                          block_ids=list(body.block_ids or []))


@router.post("/v1/identities", responses=errors(404, 409), response_model=Identity)
async def create_identity(body: IdentityCreate, runtime: RuntimeDep) -> dict[str, Any]:
    """A new identity, linked to the given agents and blocks."""
    return identity_view(await runtime.store.create_identity(_record(body)))


@router.put("/v1/identities", responses=errors(404), response_model=Identity)
async def upsert_identity(body: IdentityUpsertBody, runtime: RuntimeDep) -> dict[str, Any]:
    """Create the identity, or replace the one with this ``identifier_key`` and project."""
    return identity_view(await runtime.store.upsert_identity(_record(body)))


@router.get("/v1/identities", response_model=list[Identity])
async def list_identities(runtime: RuntimeDep, name: str | None = None,
                          project_id: str | None = None, identifier_key: str | None = None,
                          identity_type: IdentityType | None = None,
                          before: str | None = None, after: str | None = None,
                          limit: Limit = 50, order: Order = "desc",
                          order_by: OrderBy = "created_at") -> list[dict[str, Any]]:
    """Identities, newest first unless ``order=asc``; ``name`` matches a part of the name."""
    found = await runtime.store.list_identities(
        name=name, project_id=project_id, identifier_key=identifier_key,
        identity_type=identity_type, page=Page(after=after, before=before, limit=limit,
                                               order=order))
    return [identity_view(x) for x in found]


@router.get("/v1/identities/count", response_model=int)
async def count_identities(runtime: RuntimeDep) -> int:
    """How many identities there are."""
    return await runtime.store.count_identities()


@router.get("/v1/identities/{identity_id}", responses=errors(404), response_model=Identity)
async def retrieve_identity(identity_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """One identity."""
    return identity_view(await runtime.store.get_identity(identity_id))


@router.patch("/v1/identities/{identity_id}", responses=errors(404, 409),
              response_model=Identity)
async def update_identity(identity_id: str, body: IdentityUpdate,
                          runtime: RuntimeDep) -> dict[str, Any]:
    """Change the given fields; properties merge by key, agents and blocks are linked
    besides those already linked."""
    changes: dict[str, Any] = body.model_dump(
        exclude_none=True, include={"identifier_key", "name", "identity_type"})
    if body.properties is not None:
        changes["properties"] = _properties(body.properties)
    return identity_view(await runtime.store.update_identity(
        identity_id, agent_ids=body.agent_ids or [], block_ids=body.block_ids or [],
        **changes))


@router.put("/v1/identities/{identity_id}/properties", responses=errors(404),
            response_model=Identity)
async def upsert_properties_for_identity(identity_id: str, body: list[IdentityProperty],
                                         runtime: RuntimeDep) -> dict[str, Any]:
    """Replace the identity's properties with these."""
    return identity_view(await runtime.store.set_identity_properties(
        identity_id, _properties(body)))


@router.delete("/v1/identities/{identity_id}", responses=errors(404))
async def delete_identity(identity_id: str, runtime: RuntimeDep) -> None:
    """Delete the identity; its agents and blocks stay."""
    await runtime.store.delete_identity(identity_id)


@router.get("/v1/identities/{identity_id}/agents", responses=errors(404),
            response_model=list[AgentState])
async def list_agents_for_identity(identity_id: str, runtime: RuntimeDep,
                                   before: str | None = None, after: str | None = None,
                                   limit: Limit = 50, order: Order = "desc",
                                   order_by: OrderBy = "created_at",
                                   relationships: Included = EVERY,
                                   ) -> list[dict[str, Any]]:
    """The identity's agents, newest first unless ``order=asc``, with the relationships
    asked for (``include``)."""
    await runtime.store.check_identity(identity_id)
    records = await runtime.store.list_agents(
        identity_id=identity_id, page=Page(after=after, before=before, limit=limit, order=order))
    return await agent_states(runtime, records, relationships)


@router.get("/v1/identities/{identity_id}/blocks", responses=errors(404),
            response_model=list[Block])
async def list_blocks_for_identity(identity_id: str, runtime: RuntimeDep,
                                   before: str | None = None, after: str | None = None,
                                   limit: Limit = 50, order: Order = "desc",
                                   order_by: OrderBy = "created_at") -> list[dict[str, Any]]:
    """The identity's blocks, newest first unless ``order=asc``."""
    await runtime.store.check_identity(identity_id)
    blocks = await runtime.store.list_blocks(
        identity_id=identity_id, page=Page(after=after, before=before, limit=limit, order=order))
    return [block_view(b) for b in blocks]


@router.patch("/v1/agents/{agent_id}/identities/attach/{identity_id}", tags=["agents"],
              responses=errors(404))
async def attach_identity_to_agent(agent_id: str, identity_id: str,
                                   runtime: RuntimeDep) -> None:
    """Link the identity to the agent (already linked: nothing changes)."""
    await agent_record(runtime, agent_id)
    await runtime.store.attach_identity(identity_id, agent_id=agent_id)


@router.patch("/v1/agents/{agent_id}/identities/detach/{identity_id}", tags=["agents"],
              responses=errors(404))
async def detach_identity_from_agent(agent_id: str, identity_id: str,
                                     runtime: RuntimeDep) -> None:
    """Unlink the identity from the agent (not linked: nothing changes)."""
    await agent_record(runtime, agent_id)
    await runtime.store.detach_identity(identity_id, agent_id=agent_id)


@router.patch("/v1/blocks/{block_id}/identities/attach/{identity_id}", tags=["blocks"],
              responses=errors(404), response_model=Block)
async def attach_identity_to_block(block_id: str, identity_id: str,
                                   runtime: RuntimeDep) -> dict[str, Any]:
    """Link the identity to the block; the block is returned."""
    await runtime.store.attach_identity(identity_id, block_id=block_id)
    return block_view(await runtime.store.get_block(block_id))


@router.patch("/v1/blocks/{block_id}/identities/detach/{identity_id}", tags=["blocks"],
              responses=errors(404), response_model=Block)
async def detach_identity_from_block(block_id: str, identity_id: str,
                                     runtime: RuntimeDep) -> dict[str, Any]:
    """Unlink the identity from the block; the block is returned."""
    await runtime.store.detach_identity(identity_id, block_id=block_id)
    return block_view(await runtime.store.get_block(block_id))
