"""``/v1/agents/{id}/archival-memory``: passages stored and searched by meaning, across the
archives attached to the agent (inserts go to its default archive)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query

from ...store.times import to_epoch
from ..deps import RuntimeDep
from ..models.requests import CreateArchivalMemory, errors
from ..models.responses import ArchivalMemorySearchResponse, Passage, iso
from ..pagination import Limit
from ..services.runtime import Runtime
from .agents import agent_record
from .archives import passage_views

router = APIRouter(prefix="/v1/agents/{agent_id}/archival-memory", tags=["archival"])


async def _seq(runtime: Runtime, agent_id: str, passage_id: str | None) -> int | None:
    if passage_id is None:
        return None
    found = await runtime.store.get_passages([passage_id])
    if not found or found[0].archive_id not in await runtime.store.agent_archive_ids(agent_id):
        raise HTTPException(404, detail=f"agent {agent_id!r} has no passage {passage_id!r}")
    return found[0].seq


@router.get("", responses=errors(404), response_model=list[Passage])
async def list_passages(agent_id: str, runtime: RuntimeDep, after: str | None = None,
                        before: str | None = None,
                        limit: Limit = 100,
                        search: str | None = None,
                        ascending: bool = True) -> list[dict[str, Any]]:
    """The agent's passages in insertion order (``search``: those containing the text)."""
    await agent_record(runtime, agent_id)
    after_seq, before_seq = (await _seq(runtime, agent_id, after),
                             await _seq(runtime, agent_id, before))
    archives = await runtime.store.agent_archive_ids(agent_id)
    passages = await runtime.store.list_passages(
        archives, limit=limit or 100, after_seq=after_seq, before_seq=before_seq,
        order="asc" if ascending else "desc", search=search)
    return await passage_views(runtime, passages)


@router.post("", responses=errors(404, 409, 503), response_model=list[Passage])
async def insert(agent_id: str, body: CreateArchivalMemory,
                 runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Embed and store a passage."""
    await agent_record(runtime, agent_id)
    agent = await runtime.agent(agent_id)
    stored = await agent.archival().insert(agent_id, body.text, body.tags)
    agent.archival_count += len(stored)
    return await passage_views(runtime, stored)


@router.get("/search", responses=errors(404, 503),
            response_model=ArchivalMemorySearchResponse)
async def search(agent_id: str, runtime: RuntimeDep, query: str,
                 tags: Annotated[list[str] | None, Query()] = None,
                 tag_match_mode: Literal["any", "all"] = "any",
                 top_k: Limit = None,
                 start_datetime: str | None = None,
                 end_datetime: str | None = None) -> dict[str, Any]:
    """The passages closest in meaning to ``query``."""
    await agent_record(runtime, agent_id)
    for name, value in (("start_datetime", start_datetime), ("end_datetime", end_datetime)):
        try:
            to_epoch(value)
        except ValueError as exc:
            raise HTTPException(422, detail=[{"loc": ["query", name], "msg": str(exc),
                                              "type": "value_error"}]) from exc
    agent = await runtime.agent(agent_id)
    try:
        hits = await agent.archival().search(agent_id, query, tags=tags,
                                             tag_match_mode=tag_match_mode, top_k=top_k or 10,
                                             start_datetime=start_datetime,
                                             end_datetime=end_datetime)
    except ValueError as exc:
        raise HTTPException(422, detail=[{"loc": ["query"], "msg": str(exc),
                                          "type": "value_error"}]) from exc
    results = [{"id": h.passage.id, "content": h.passage.text,
                "timestamp": iso(h.passage.created_at), "tags": h.passage.tags}
               for h in hits]
    return {"count": len(results), "results": results}


@router.delete("/{memory_id}", responses=errors(404))
async def delete(agent_id: str, memory_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Delete one passage."""
    await agent_record(runtime, agent_id)
    await _seq(runtime, agent_id, memory_id)
    agent = await runtime.agent(agent_id)
    agent.archival_count -= await agent.archival().delete([memory_id])
    return {}
