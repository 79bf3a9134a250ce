"""``/v1/archives``: named archival stores that agents share, and attaching them to agents.

An agent's archival memory is the archives attached to it: passages one agent inserts, every
agent attached finds (``archival_memory_search``, ``GET .../archival-memory``). Detaching takes
access away and keeps the data. Deleting an agent keeps its archives, as in Letta: they are
deleted here. Every archive's vectors live in this database (``vector_db_provider: native``).
An archive has one embedding model, named on create (``embedding`` or ``embedding_config``, of
a configured provider) or the server's default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal
from weakref import WeakKeyDictionary

from fastapi import APIRouter, HTTPException, Response

from ...memory.archival import ArchivalMemory
from ...store import ArchiveRecord, Page, PassageRecord
from ...store.times import to_epoch
from ..deps import RuntimeDep
from ..models.archives import (
    Archive,
    ArchiveCreateRequest,
    ArchiveUpdateRequest,
    PassageBatchCreateRequest,
    PassageCreateRequest,
)
from ..models.requests import errors
from ..models.responses import AgentState, Passage, iso
from ..pagination import Limit, Order
from ..services.agent_fields import embedding_config
from ..services.relationships import EVERY, Included
from ..services.runtime import Runtime
from ..services.views import passage_view
from .agents import agent_record, agent_states

router = APIRouter(tags=["archives"])

ORGANIZATION_ID = "org-00000000-0000-4000-8000-000000000000"  # Letta's default organization
_memories: WeakKeyDictionary[Runtime, ArchivalMemory] = WeakKeyDictionary()


def archival_memory(runtime: Runtime) -> ArchivalMemory:
    """The server's archival memory for archive-level operations (its indexes are kept)."""
    memory = _memories.get(runtime)
    if memory is None:
        memory = _memories[runtime] = ArchivalMemory(runtime.store, runtime.embedder(),
                                                     runtime.embedders)
    return memory


async def passage_views(runtime: Runtime, passages: Sequence[PassageRecord]
                        ) -> list[dict[str, Any]]:
    """Letta's ``Passage`` of each, with its vector and its archive's ``embedding_config``."""
    memory = archival_memory(runtime)
    configs = {archive_id: await memory.archive_config(archive_id)
               for archive_id in {p.archive_id for p in passages if p.archive_id}}
    return [passage_view(p, configs.get(p.archive_id or "")) for p in passages]


def archive_view(archive: ArchiveRecord) -> dict[str, Any]:
    """Letta's ``Archive``."""
    return {"id": archive.id, "name": archive.name, "description": archive.description,
            "organization_id": ORGANIZATION_ID, "vector_db_provider": archive.vector_db_provider,
            "embedding_config": archive.embedding_config, "metadata": archive.metadata,
            "created_at": iso(archive.created_at), "updated_at": iso(archive.updated_at)}


@router.post("/v1/archives", responses=errors(404), response_model=Archive)
async def create_archive(body: ArchiveCreateRequest, runtime: RuntimeDep) -> dict[str, Any]:
    """A new archive, embedded with the model its ``embedding`` or ``embedding_config`` names
    (422 if its provider is not configured), else the server's default."""
    config = await embedding_config(runtime.embedders, body.embedding, body.embedding_config,
                                    default=True)
    archive = await runtime.store.create_archive(ArchiveRecord(
        name=body.name, description=body.description, embedding_config=config))
    return archive_view(archive)


@router.get("/v1/archives", response_model=list[Archive])
async def list_archives(runtime: RuntimeDep, before: str | None = None,
                        after: str | None = None, limit: Limit = 50, order: Order = "desc",
                        order_by: Literal["created_at"] = "created_at",
                        name: str | None = None,
                        agent_id: str | None = None) -> list[dict[str, Any]]:
    """Archives, by exact ``name`` and those attached to ``agent_id``, with cursors."""
    archives = await runtime.store.list_archives(
        name=name, agent_id=agent_id,
        page=Page(after=after, before=before, limit=limit, order=order))
    return [archive_view(a) for a in archives]


@router.get("/v1/archives/{archive_id}", responses=errors(404), response_model=Archive)
async def retrieve_archive(archive_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """One archive."""
    return archive_view(await runtime.store.get_archive(archive_id))


@router.patch("/v1/archives/{archive_id}", responses=errors(404), response_model=Archive)
async def modify_archive(archive_id: str, body: ArchiveUpdateRequest,
                         runtime: RuntimeDep) -> dict[str, Any]:
    """Rename an archive or change its description."""
    changes = body.model_dump(exclude_unset=True)
    if changes.get("name", "") is None:
        changes.pop("name")  # an explicit null keeps the name, as in Letta
    return archive_view(await runtime.store.update_archive(archive_id, **changes))


@router.delete("/v1/archives/{archive_id}", status_code=204, responses=errors(404))
async def delete_archive(archive_id: str, runtime: RuntimeDep) -> Response:
    """Delete an archive with its passages; the agents attached lose it."""
    await runtime.store.delete_archive(archive_id)
    return Response(status_code=204)


@router.get("/v1/archives/{archive_id}/agents", responses=errors(404),
            response_model=list[AgentState])
async def list_agents_for_archive(
        archive_id: str, runtime: RuntimeDep, before: str | None = None,
        after: str | None = None, limit: Limit = 50, order: Order = "desc",
        relationships: Included = EVERY) -> list[dict[str, Any]]:
    """The agents attached to an archive, newest first by default (as Letta orders them: by
    their creation), with the relationships asked for (``include``)."""
    await runtime.store.get_archive(archive_id)  # 404 for an archive that is not there
    records = await runtime.store.list_agents(
        archive_id=archive_id, page=Page(after=after, before=before, limit=limit, order=order))
    return await agent_states(runtime, records, relationships)


@router.post("/v1/archives/{archive_id}/passages", responses=errors(404, 409, 503),
             response_model=Passage)
async def create_passage_in_archive(archive_id: str, body: PassageCreateRequest,
                                    runtime: RuntimeDep) -> dict[str, Any]:
    """Embed and store a passage in the archive."""
    [stored] = await _insert(runtime, archive_id, [body])
    return stored


@router.post("/v1/archives/{archive_id}/passages/batch", responses=errors(404, 409, 503),
             response_model=list[Passage])
async def create_passages_in_archive(archive_id: str, body: PassageBatchCreateRequest,
                                     runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Embed and store several passages in the archive."""
    return await _insert(runtime, archive_id, body.passages)


@router.delete("/v1/archives/{archive_id}/passages/{passage_id}", status_code=204,
               responses=errors(404))
async def delete_passage_from_archive(archive_id: str, passage_id: str,
                                      runtime: RuntimeDep) -> Response:
    """Delete one passage of the archive."""
    await runtime.store.get_archive(archive_id)
    found = await runtime.store.get_passages([passage_id])
    if not found or found[0].archive_id != archive_id:
        raise HTTPException(404, detail=f"archive {archive_id!r} has no passage {passage_id!r}")
    await archival_memory(runtime).delete([passage_id])
    return Response(status_code=204)


@router.patch("/v1/agents/{agent_id}/archives/attach/{archive_id}", tags=["agents"],
              responses=errors(404))
async def attach_archive_to_agent(archive_id: str, agent_id: str,
                                  runtime: RuntimeDep) -> None:
    """Give the agent the archive: its searches cover it from now on."""
    await agent_record(runtime, agent_id)
    await runtime.store.attach_archive(agent_id, archive_id)
    await _recount(runtime, agent_id)


@router.patch("/v1/agents/{agent_id}/archives/detach/{archive_id}", tags=["agents"],
              responses=errors(404))
async def detach_archive_from_agent(archive_id: str, agent_id: str,
                                    runtime: RuntimeDep) -> None:
    """Take the archive from the agent; the archive and its passages stay."""
    await agent_record(runtime, agent_id)
    await runtime.store.detach_archive(agent_id, archive_id)
    await _recount(runtime, agent_id)


async def _recount(runtime: Runtime, agent_id: str) -> None:
    live = runtime.live(agent_id)
    if live is not None:  # the count its prompt shows
        live.archival_count = await runtime.store.count_passages(agent_id)


async def _insert(runtime: Runtime, archive_id: str,
                  bodies: list[PassageCreateRequest]) -> list[dict[str, Any]]:
    await runtime.store.get_archive(archive_id)
    for number, body in enumerate(bodies):
        try:
            to_epoch(body.created_at)
        except ValueError as exc:
            loc = ["body", "created_at"] if len(bodies) == 1 else \
                ["body", "passages", number, "created_at"]
            raise HTTPException(422, detail=[{"loc": loc, "msg": str(exc),
                                              "type": "value_error"}]) from exc
    memory = archival_memory(runtime)
    stored = []
    for body in bodies:  # each its own tags, metadata and time
        stored += await memory.insert_into(archive_id, body.text, body.tags, body.metadata,
                                           body.created_at)
    return await passage_views(runtime, stored)
