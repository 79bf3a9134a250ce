"""What the server holds, at a glance: tags, models, counts of agents, blocks and
tools, and the agents sharing a block.

Registered before the agents, blocks and tools routers, so ``/v1/agents/count`` is not read
as an agent id.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ...llm.listing import Listed
from ...llm.models import DEFAULT_LIMITS, known_limits
from ...llm.providers import CATALOGUE, endpoint_type
from ...store import Page
from ...store.providers import ProviderRecord
from ..deps import RuntimeDep
from ..models.requests import errors
from ..models.responses import AgentState, EmbeddingModel, Model
from ..pagination import Limit, Order
from ..services.relationships import EVERY, Relationships
from .agents import agent_states

router = APIRouter()

_PROVIDER_TYPES = {"openai", "anthropic"} | set(CATALOGUE)


@router.get("/v1/tags", tags=["tag"], response_model=list[str])
async def list_tags(runtime: RuntimeDep, before: str | None = None, after: str | None = None,
                    limit: Limit = 50, order: Order = "asc",
                    query_text: Annotated[str | None, Query(deprecated=True)] = None,
                    name: str | None = None) -> list[str]:
    """Tags in use by agents, alphabetically; ``after``/``before`` are tags, as in Letta
    (blocks carry no tags here)."""
    return await runtime.store.list_tags(
        name or query_text, Page(after=after, before=before, limit=limit, order=order))


@router.get("/v1/models", tags=["models"], response_model=list[Model])
async def list_models(runtime: RuntimeDep,
                      provider_category: Annotated[list[str] | None, Query()] = None,
                      provider_name: str | None = None,
                      provider_type: str | None = None) -> list[dict[str, Any]]:
    """The server's default model first (a client that takes the first model, as Letta
    Code does, gets the operator's choice), then every model an agent uses and the chat
    models each provider lists, by handle: the operator's providers' are 'base' models, those
    of the providers added over ``/v1/providers`` 'byok' (``provider_category`` picks)."""
    listed = {m.handle: m for m in await runtime.model_listings.current() if not m.embedding}
    default = runtime.settings.default_model
    handles = {default, *listed}
    handles.update(await runtime.store.agent_models())
    categories = provider_category or ["base", "byok"]
    records = {r.name: r for r in await runtime.store.list_providers()}
    own = await _own_models(runtime, records, handles) if "byok" in categories else {}
    found = [{**(_listed_model(listed[h]) if h in listed else _model(h)),
              "provider_category": "base"}
             for h in sorted(handles, key=lambda h: (h != default, h))
             if h.partition("/")[0] not in records
             and "base" in categories]
    found += [{**own[h], "provider_category": "byok"} for h in sorted(own)]
    return [m for m in found if provider_name in (None, m["provider_name"])
            and provider_type in (None, m["provider_type"])]


async def _own_models(runtime: RuntimeDep, records: dict[str, ProviderRecord],
                      handles: set[str]) -> dict[str, dict[str, Any]]:
    """The models of the providers added over ``/v1/providers`` (``byok``), by handle: what
    each lists, and those agents use that it does not list."""
    own: dict[str, dict[str, Any]] = {}
    for name, models in (await runtime.providers.models(list(records.values()))).items():
        for model in models:
            if not model.embedding:
                own[f"{name}/{model.model}"] = {
                    **_listed_model(model), "handle": f"{name}/{model.model}",
                    "provider_name": name, "model_endpoint": None}
    for handle in handles:
        prefix = handle.partition("/")[0]
        if prefix in records and handle not in own:
            kind = records[prefix].provider_type
            own[handle] = {**_model(handle), "provider_type": kind,
                           "model_endpoint_type": endpoint_type(kind)}
    return own


@router.get("/v1/models/embedding", tags=["models"], response_model=list[EmbeddingModel])
async def list_embedding_models(runtime: RuntimeDep) -> list[dict[str, Any]]:
    """The embedding models agents, archives and folders may ask for by handle: the default
    (``STATELOOP_EMBEDDING``) first, the offline MiniLM, OpenAI's when it is configured, the
    embedding models the configured providers with embeddings list, then those the providers
    added over ``/v1/providers`` list (``NAME/MODEL``)."""
    found = [_embedding_model(config) for config in runtime.embedders.available()]
    known = {model["handle"] for model in found}
    for listed in await runtime.model_listings.current():
        # Only providers whose embeddings are served here.
        if (listed.embedding and CATALOGUE[listed.provider].embeddings
                and listed.handle not in known):
            found.append(_listed_embedding(listed))
    records = {r.name: r for r in await runtime.store.list_providers()}
    for name, models in (await runtime.providers.models(list(records.values()))).items():
        kind = records[name].provider_type
        found += [{**_listed_embedding(model), "handle": f"{name}/{model.model}",
                   "provider_name": name, "embedding_endpoint": None}
                  for model in models if model.embedding and CATALOGUE[kind].embeddings]
    return found


@router.get("/v1/agents/count", tags=["agents"], response_model=int)
async def count_agents(runtime: RuntimeDep, name: str | None = None,
                       tags: Annotated[list[str] | None, Query()] = None,
                       match_all_tags: bool = False, query_text: str | None = None,
                       identity_id: str | None = None,
                       identifier_keys: Annotated[list[str] | None, Query()] = None) -> int:
    """How many agents match: exact ``name``, ``tags`` (any, or all), ``query_text`` in the
    name, an identity (by id, or any of ``identifier_keys``)."""
    return await runtime.store.count_agents(name=name, tags=tags, match_all_tags=match_all_tags,
                                            query_text=query_text, identity_id=identity_id,
                                            identifier_keys=identifier_keys)


@router.get("/v1/blocks/count", tags=["blocks"], response_model=int)
async def count_blocks(runtime: RuntimeDep, label: str | None = None,
                       templates_only: bool = False, name: str | None = None,
                       tags: Annotated[list[str] | None, Query()] = None,
                       match_all_tags: bool = False) -> int:
    """How many blocks there are (with this ``label``). Blocks here are never templates and
    carry no template name or tags, so asking for those counts none."""
    if templates_only or name is not None or tags:
        return 0
    return await runtime.store.count_blocks(label=label)


@router.get("/v1/tools/count", tags=["tools"], response_model=int)
async def count_tools(runtime: RuntimeDep, name: str | None = None,
                      names: Annotated[list[str] | None, Query()] = None,
                      tool_ids: Annotated[list[str] | None, Query()] = None,
                      search: str | None = None,
                      tool_types: Annotated[list[str] | None, Query()] = None,
                      exclude_tool_types: Annotated[list[str] | None, Query()] = None,
                      return_only_letta_tools: bool | None = False,
                      exclude_letta_tools: bool | None = False) -> int:
    """How many tools match every filter given; list filters take repeated parameters or
    comma-separated values."""
    wanted_names = _split(names) | ({name} if name is not None else set())
    return await runtime.store.count_tools(
        names=sorted(wanted_names), ids=sorted(_split(tool_ids)), search=search,
        types=sorted(_split(tool_types)), exclude_types=sorted(_split(exclude_tool_types)),
        letta_only=bool(return_only_letta_tools), exclude_letta=bool(exclude_letta_tools))


@router.get("/v1/blocks/{block_id}/agents", tags=["blocks"], responses=errors(404),
            response_model=list[AgentState])
async def list_agents_for_block(block_id: str, runtime: RuntimeDep, before: str | None = None,
                                after: str | None = None, limit: Limit = 50,
                                order: Order = "desc", relationships: Relationships = EVERY,
                                ) -> list[dict[str, Any]]:
    """The agents this block is attached to, newest first by default, with the
    relationships asked for (``include``)."""
    await runtime.store.get_block(block_id)  # 404 for a block that is not there
    records = await runtime.store.list_agents(
        block_id=block_id, page=Page(after=after, before=before, limit=limit, order=order))
    return await agent_states(runtime, records, relationships)


def _split(values: list[str] | None) -> set[str]:
    return {part.strip() for value in values or () for part in value.split(",") if part.strip()}


def _model(handle: str) -> dict[str, Any]:
    provider, _, name = handle.partition("/")
    name = name or handle
    limits = known_limits(name) or DEFAULT_LIMITS
    kind = provider if provider in _PROVIDER_TYPES else "openai"
    return {"handle": handle, "name": name, "display_name": name, "provider_type": kind,
            "provider_name": provider or kind, "model_type": "llm", "model": name,
            "model_endpoint_type": endpoint_type(kind), "model_endpoint": None,
            "context_window": limits.context_window,
            "max_context_window": limits.context_window,
            "max_tokens": limits.max_output_tokens}


def _listed_model(listed: Listed) -> dict[str, Any]:
    return {**_model(listed.handle), "provider_type": listed.provider,
            "model_endpoint_type": endpoint_type(listed.provider),
            "model_endpoint": listed.endpoint,
            "context_window": listed.context_window,
            "max_context_window": listed.context_window, "max_tokens": listed.max_tokens}


def _listed_embedding(listed: Listed) -> dict[str, Any]:
    return {"handle": listed.handle, "name": listed.model, "display_name": listed.model,
            "provider_type": listed.provider, "provider_name": listed.provider,
            "model_type": "embedding",
            "embedding_endpoint_type": endpoint_type(listed.provider, embedding=True),
            "embedding_endpoint": listed.endpoint, "embedding_model": listed.model,
            "embedding_dim": 0, "embedding_chunk_size": 300}


def _embedding_model(config: dict[str, Any]) -> dict[str, Any]:
    provider, _, name = config["handle"].partition("/")
    return {"handle": config["handle"], "name": name, "display_name": name,
            "provider_type": provider, "provider_name": provider, "model_type": "embedding",
            "embedding_endpoint_type": config["embedding_endpoint_type"],
            "embedding_endpoint": config["embedding_endpoint"],
            "embedding_model": config["embedding_model"],
            "embedding_dim": config["embedding_dim"],
            "embedding_chunk_size": config["embedding_chunk_size"]}
