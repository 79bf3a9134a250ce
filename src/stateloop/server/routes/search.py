"""Search across agents: ``GET /v1/messages``, ``POST /v1/messages/search``,
``POST /v1/agents/messages/search`` (recall, over the store's full-text index) and
``POST /v1/passages/search`` (archival, by meaning over the archives' vectors).

Letta's ``search_mode`` ``vector`` and ``hybrid`` rank messages by embeddings kept in an
external vector database (Turbopuffer); messages here have no embeddings, so every mode is
full-text ranking (bm25), the closest we have: ``fts_rank`` is the rank, ``vector_rank`` is
null and ``rrf_score`` is Letta's reciprocal-rank score of that one ranking, 1/(60 + rank).
There are no projects, templates or conversations here: a filter by one matches nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from ...messages import Message
from ...store import MessageHit, PassageRecord
from ...store.times import to_epoch
from ..deps import RuntimeDep
from ..models.archives import (
    MessageListResult,
    MessageSearchRequest,
    MessageSearchResult,
    PassageSearchRequest,
    PassageSearchResult,
    SearchAllMessagesRequest,
)
from ..models.requests import errors
from ..models.responses import iso
from ..pagination import Order
from ..services.messages import history_frames, to_letta
from ..services.runtime import Runtime
from ..sse import wanted
from .agents import agent_record
from .archives import archival_memory, passage_views

router = APIRouter(tags=["messages"])

_RRF_K = 60  # Letta's reciprocal-rank-fusion constant
_LISTED = {"system_message", "user_message", "reasoning_message", "assistant_message"}
_PASSAGE_WINDOW = 10_000  # a search without a query reads at most this many passages


@router.get("/v1/messages", responses=errors(400))
async def list_all_messages(
    runtime: RuntimeDep, before: str | None = None, after: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=1000)] = 100, order: Order = "desc",
    conversation_id: str | None = None,
    include_return_message_types: Annotated[list[str] | None, Query()] = None,
) -> list[dict[str, Any]]:
    """Every agent's messages, a page at a time (cursors are message ids); ``order`` picks
    the end of the history the page comes from, as ``GET /v1/agents/{id}/messages`` does."""
    if conversation_id is not None:
        return []
    try:
        stored = await runtime.store.list_messages(None, before=before, after=after,
                                                   limit=limit or 100, order=order)
    except (ValueError, LookupError) as exc:
        raise HTTPException(400, detail=f"bad cursor: {exc}") from exc
    if order == "desc":
        stored.reverse()
    frames = await history_frames(runtime.store, stored)
    return [f for f in frames if wanted(f, include_return_message_types)]


@router.post("/v1/messages/search", responses=errors(404),
             response_model=list[MessageListResult])
async def search_all_messages(body: SearchAllMessagesRequest,
                              runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Messages of every agent (or ``agent_id``'s) that match ``query``, best first, as
    Letta's list results (system, user, reasoning and assistant parts)."""
    if body.conversation_id is not None:
        return []
    hits = await _recall(runtime, body.agent_id, body.query, None, body.limit,
                         body.start_date, body.end_date)
    results: list[dict[str, Any]] = []
    for hit in hits:
        for frame in to_letta(hit.message, run_id=hit.run_id):
            if frame["message_type"] not in _LISTED:
                continue
            result = {"message_type": frame["message_type"], "message_id": hit.message.id,
                      "agent_id": hit.agent_id, "conversation_id": None,
                      "created_at": iso(hit.message.created_at)}
            if frame["message_type"] == "reasoning_message":
                result["reasoning"] = frame["reasoning"]
            else:
                result["content"] = frame["content"]
            results.append(result)
    return results


@router.post("/v1/agents/messages/search", tags=["agents"], responses=errors(404),
             response_model=list[MessageSearchResult])
async def search_messages(body: MessageSearchRequest,
                          runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Stored messages matching ``query`` (the most recent without one), best first, each
    with its rank; ``roles`` narrows them (default: user and assistant)."""
    if body.conversation_id or body.project_id or body.template_id:
        return []
    hits = await _recall(runtime, body.agent_id, body.query or "", body.roles, body.limit,
                         body.start_date, body.end_date)
    return [{"embedded_text": hit.message.text, "message": _stored(hit),
             "fts_rank": rank, "vector_rank": None, "rrf_score": 1 / (_RRF_K + rank)}
            for rank, hit in enumerate(hits, start=1)]


@router.post("/v1/passages/search", tags=["passages"], responses=errors(404, 409, 503),
             response_model=list[PassageSearchResult])
async def search_passages(body: PassageSearchRequest,
                          runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Passages closest in meaning to ``query`` in ``agent_id``'s archives (it wins over
    ``archive_id``), in ``archive_id``, or in every archive; without a query, the newest
    passages that pass the tag and date filters (score 0)."""
    start, end = _dates(body.start_date, body.end_date)
    if body.agent_id is not None:
        await agent_record(runtime, body.agent_id)
        archives = await runtime.store.agent_archive_ids(body.agent_id)
    elif body.archive_id is not None:
        archives = [(await runtime.store.get_archive(body.archive_id)).id]
    else:
        archives = [a.id for a in await runtime.store.list_archives()]
    if body.query:
        hits = await archival_memory(runtime).search_archives(
            archives, body.query, tags=body.tags, tag_match_mode=body.tag_match_mode,
            top_k=body.limit, start_datetime=start, end_datetime=end)
        views = await passage_views(runtime, [h.passage for h in hits])
        return [{"passage": view, "score": h.score, "metadata": {}}
                for view, h in zip(views, hits, strict=True)]
    newest = await runtime.store.list_passages(archives, limit=_PASSAGE_WINDOW, order="desc")
    chosen = [p for p in newest if _passes(p, body.tags, body.tag_match_mode, start, end)]
    return [{"passage": view, "score": 0.0, "metadata": {}}
            for view in await passage_views(runtime, chosen[:body.limit])]


async def _recall(runtime: Runtime, agent_id: str | None, query: str,
                  roles: Sequence[str] | None, limit: int, start_date: str | None,
                  end_date: str | None) -> list[MessageHit]:
    start, end = _dates(start_date, end_date)
    if agent_id is not None:
        await agent_record(runtime, agent_id)
    include_tool = roles is not None and "tool" in roles
    return await runtime.store.search_messages(agent_id, query, roles=roles, limit=limit,
                                               start_date=start, end_date=end,
                                               include_tool=include_tool)


def _dates(start: str | None, end: str | None) -> tuple[float | None, float | None]:
    try:
        return to_epoch(start), to_epoch(end, end_of_day=True)
    except ValueError as exc:
        raise HTTPException(422, detail=[{"loc": ["body", "start_date/end_date"],
                                          "msg": str(exc), "type": "value_error"}]) from exc


def _passes(passage: PassageRecord, tags: list[str] | None, mode: str, start: float | None,
            end: float | None) -> bool:
    if tags:
        held = set(passage.tags)
        if not (held.issuperset(tags) if mode == "all" else held.intersection(tags)):
            return False
    return (start is None or passage.created_at >= start) and (
        end is None or passage.created_at <= end)


def _stored(hit: MessageHit) -> dict[str, Any]:
    """Letta's ``Message`` for a stored message."""
    message: Message = hit.message
    calls = [{"id": c.id, "type": "function",
              "function": {"name": c.name, "arguments": c.raw_arguments
                           if c.raw_arguments is not None else json.dumps(c.arguments)}}
             for c in message.tool_calls] or None
    return {"id": message.id, "role": message.role, "agent_id": hit.agent_id,
            "run_id": hit.run_id, "created_at": iso(message.created_at),
            "content": [{"type": "text", "text": message.text}] if message.text else [],
            "name": message.name, "tool_calls": calls, "tool_call_id": message.tool_call_id,
            "is_err": message.is_error if message.role == "tool" else None}
