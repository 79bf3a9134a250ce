"""``/v1/agents``: create, list, retrieve, modify, delete; the context overview, the
agent's tool variables (``secrets``) and attached repositories (none here)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response

from ...agent import Agent
from ...store import AgentRecord, Page
from ..deps import RuntimeDep
from ..models.requests import CreateAgent, UpdateAgent, errors
from ..models.responses import (
    AgentEnvironmentVariable,
    AgentRepositories,
    AgentState,
    ContextWindowOverview,
)
from ..pagination import Limit, Order
from ..permissions import in_project
from ..services.creation import create_agent, update_agent
from ..services.relationships import EVERY, Relationships
from ..services.runtime import Runtime
from ..services.sleeptime import drop_sleeptime
from ..services.unreadable import readable, readable_json, unreadable
from ..services.views import agent_view, env_views, identity_view

router = APIRouter(prefix="/v1/agents", tags=["agents"])


async def agent_state(runtime: Runtime, record: AgentRecord) -> dict[str, Any]:
    """Letta's ``AgentState`` for a stored agent; a record that cannot be shown as it is
    (an older version's, say) is shown marked, as ``unreadable.readable`` says."""
    return (await agent_states(runtime, [record]))[0]


async def agent_states(runtime: Runtime, records: list[AgentRecord],
                       relationships: frozenset[str] = EVERY) -> list[dict[str, Any]]:
    """``agent_state`` of each record with these of its relationships (the others empty,
    as Letta leaves them): blocks, tools, groups and identities are read in one query
    each, for these agents only, when asked for."""
    return [readable(AgentState, view)
            for view in await _agent_views(runtime, records, relationships)]


async def _agent_views(runtime: Runtime, records: list[AgentRecord],
                       relationships: frozenset[str]) -> list[dict[str, Any]]:
    if not records:
        return []
    ids = [record.id for record in records]
    blocks = (await runtime.store.agents_blocks(ids) if "agent.blocks" in relationships
              else {})
    names = sorted({name for record in records for name in record.tool_names})
    tools = (await runtime.store.list_tools(names)
             if names and "agent.tools" in relationships else [])
    groups = (await runtime.store.managed_groups(ids)
              if "agent.managed_group" in relationships else {})
    identities = (await runtime.store.agents_identities(ids)
                  if "agent.identities" in relationships else {})
    views = []
    for record in records:
        view = agent_view(record, blocks.get(record.id, []), tools, groups.get(record.id),
                          relationships)
        mine = identities.get(record.id, [])
        view["identities"] = [identity_view(identity) for identity in mine]
        view["identity_ids"] = [identity.id for identity in mine]
        views.append(view)
    return views


async def agent_record(runtime: Runtime, agent_id: str) -> AgentRecord:
    """The stored agent with this id (404 otherwise, and for another project's)."""
    if not await in_project(runtime.store, "agent_id", agent_id):
        raise HTTPException(404, detail=f"agent with id {agent_id!r} not found")
    record = await runtime.store.get_agent(agent_id)
    if record.id != agent_id:  # the store also finds agents by name; the API uses ids
        raise HTTPException(404, detail=f"agent with id {agent_id!r} not found")
    return record


async def live_agent(runtime: Runtime, agent_id: str) -> Agent:
    """The live agent with this id, loaded on first use in one read (404, as
    ``agent_record``'s, when there is none). One already live is used without a read: a
    deleted agent is no longer live, and changes reach the live agent as they are made."""
    if not await in_project(runtime.store, "agent_id", agent_id):
        raise HTTPException(404, detail=f"agent with id {agent_id!r} not found")
    return await runtime.agent(agent_id)  # live while this request runs


@router.post("", responses=errors(400, 404, 409), response_model=AgentState)
async def create(body: CreateAgent, runtime: RuntimeDep) -> dict[str, Any]:
    """Create an agent with memory blocks, tools, tool rules, model, tags and identities."""
    await runtime.store.check_identities(body.identity_ids or [])  # 404 before storing
    agent_id = await create_agent(runtime, body)
    if body.identity_ids:
        await runtime.store.set_agent_identities(agent_id, body.identity_ids)
    return await agent_state(runtime, await runtime.store.get_agent(agent_id))


@router.get("", response_model=list[AgentState])
async def list_agents(
    runtime: RuntimeDep,
    name: str | None = None,
    query_text: str | None = None,
    tags: Annotated[list[str] | None, Query()] = None,
    match_all_tags: bool = False,
    identity_id: str | None = None,
    identifier_keys: Annotated[list[str] | None, Query()] = None,
    before: str | None = None,
    after: str | None = None,
    limit: Limit = 50,
    order: Order = "desc",
    ascending: bool | None = None,
    relationships: Relationships = EVERY,
) -> Response:
    """Agents, filtered by name (exact, or a part of it in any case), tags and identities,
    with cursor pagination, with the relationships asked for (``include``). Names repeat,
    as in Letta. Each agent is validated once, and the page written from those models
    (``readable_json``)."""
    if ascending is not None and order == "desc":
        order = "asc" if ascending else "desc"
    records = await runtime.store.list_agents(
        name=name, query_text=query_text, tags=tags, match_all_tags=match_all_tags,
        identity_id=identity_id, identifier_keys=identifier_keys,
        page=Page(after=after, before=before, limit=limit, order=order))
    return Response(readable_json(AgentState, await _agent_views(runtime, records,
                                                                 relationships)),
                    media_type="application/json")


@router.get("/{agent_id}", responses=errors(404, 409), response_model=AgentState)
async def retrieve(agent_id: str, runtime: RuntimeDep,
                   relationships: Relationships = EVERY) -> dict[str, Any]:
    """One agent's state with the relationships asked for (``include``); 409 naming the
    fields for a stored record that cannot be read as it is (a list shows it marked)."""
    view = (await agent_states(runtime, [await agent_record(runtime, agent_id)],
                               relationships))[0]
    problem = unreadable(view)
    if problem is not None:
        raise HTTPException(409, detail=problem)
    return view


@router.patch("/{agent_id}", responses=errors(404, 409), response_model=AgentState)
async def modify(agent_id: str, body: UpdateAgent, runtime: RuntimeDep) -> dict[str, Any]:
    """Change name, system prompt, model, tools, tool rules, tags, description, metadata,
    identities."""
    await agent_record(runtime, agent_id)
    await runtime.store.check_identities(body.identity_ids or [])  # 404 before storing
    await update_agent(runtime, agent_id, body)
    if body.identity_ids is not None:
        await runtime.store.set_agent_identities(agent_id, body.identity_ids)
    return await agent_state(runtime, await runtime.store.get_agent(agent_id))


@router.delete("/{agent_id}", responses=errors(404, 409))
async def delete(agent_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Delete an agent, its history and the blocks no other agent shares."""
    await agent_record(runtime, agent_id)
    live = runtime.live(agent_id)
    if live is not None and live.running:
        raise HTTPException(409, detail=f"agent {agent_id!r} is running; cancel the run "
                                        "before deleting it")
    await drop_sleeptime(runtime, agent_id)
    await runtime.store.delete_agent(agent_id)
    runtime.forget(agent_id)
    return {}


@router.get("/{agent_id}/context", responses=errors(404),
            response_model=ContextWindowOverview)
async def context(agent_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """How the agent's context window is used (Letta's ContextWindowOverview)."""
    agent = await live_agent(runtime, agent_id)
    overview = agent.context_overview().to_dict()
    overview.setdefault("num_tokens_memory_filesystem", 0)
    overview.setdefault("memory_filesystem", None)
    overview.setdefault("num_tokens_directories", 0)
    overview.setdefault("directories", None)
    return overview


@router.get("/{agent_id}/secrets", responses=errors(404),
            response_model=list[AgentEnvironmentVariable])
async def secrets(agent_id: str, runtime: RuntimeDep) -> list[dict[str, Any]]:
    """The agent's tool variables with their values: what ``include=agent.secrets`` shows
    (Letta Code reads them here, and sets them with a PATCH of ``secrets``)."""
    return env_views(await agent_record(runtime, agent_id))


@router.get("/{agent_id}/repositories", responses=errors(404),
            response_model=AgentRepositories)
async def repositories(agent_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Git repositories attached to the agent besides its memory: none here (the agent's
    memory is its own repository, ``/v1/git/{agent_id}/state.git``)."""
    await agent_record(runtime, agent_id)
    return {"repositories": []}
