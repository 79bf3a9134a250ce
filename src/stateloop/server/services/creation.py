"""Creating and modifying agents from Letta's request bodies: everything is validated first,
so a bad request stores nothing."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException

from ...agent import Agent
from ...agent_options import parse_rules, tool_map
from ...errors import ConfigError
from ...llm.base import settings_dict
from ...llm.providers import served
from ...llm.registry import resolve_model
from ...llm.tokens import message_tokens
from ...memory.blocks import DEFAULT_BLOCK_LIMIT, Block
from ...memory.compaction import SystemPromptTooLarge
from ...persistence import block_from_record, block_record
from ...store import AgentRecord, BlockRecord
from ...tools import Tool
from ...tools.builtin import builtin_names
from ..models.requests import CreateAgent, LLMConfig, UpdateAgent
from .agent_fields import (
    embedding_config,
    initial_messages,
    merged_rules,
    model_settings,
    unprocessable,
)
from .runtime import Runtime, with_default_approvals
from .sleeptime import set_sleeptime
from .tool_env import agent_env, replace_env

DEFAULT_SYSTEM = ("You are a helpful assistant with persistent memory. Your core memory "
                  "blocks are always in your context; use your tools to keep them current.")


def model_handle(model: str | None, llm_config: LLMConfig | None, default: str) -> str:
    """Letta's ``model`` handle, or one built from ``llm_config``."""
    if model:
        return model
    if llm_config is not None:
        if "/" in llm_config.model and llm_config.handle is None:
            return llm_config.model
        kind = llm_config.model_endpoint_type
        provider = kind if kind in served() else "openai"
        return llm_config.handle or f"{provider}/{llm_config.model}"
    return default


async def tool_names(runtime: Runtime, names: list[str], tool_ids: list[str]) -> list[str]:
    """Tool names from names and ids. Unknown names are Letta's 400 "Tools not found by
    name: {...}" (Letta Code matches that text to retry without server tools); an unknown id
    is a 404 naming it."""
    chosen = list(names)
    for tool_id in tool_ids:
        chosen.append((await runtime.store.get_tool(tool_id)).name)
    builtins = set(builtin_names())
    custom = [n for n in chosen if n not in builtins]
    known = {t.name for t in await runtime.store.list_tools(custom)} if custom else set()
    unknown = sorted({n for n in custom if n not in known})
    if unknown:
        listed = ", ".join(map(repr, unknown))
        raise HTTPException(400, detail=f"Tools not found by name: {{{listed}}}; create them "
                                        "with POST /v1/tools/ first")
    return list(dict.fromkeys(chosen))


async def create_agent(runtime: Runtime, body: CreateAgent) -> str:
    """Validate ``body``, store the agent with its blocks and opening messages; its id."""
    store = runtime.store
    handle = model_handle(body.model, body.llm_config, runtime.settings.default_model)
    await runtime.providers.refresh_for(handle)  # one added on another process resolves too
    _not_deleted(runtime, handle)
    settings = model_settings(body.model_settings, body.response_format,
                              handle.partition("/")[0])
    await runtime.providers.refresh_for(body.embedding)  # a provider added elsewhere?
    embedding = await embedding_config(runtime.embedders, body.embedding,
                                       body.embedding_config, body.embedding_chunk_size)
    names = await tool_names(runtime, body.tools or [], body.tool_ids or [])
    env = body.secrets or body.tool_exec_environment_variables or {}
    tools = await runtime.bind_tools(names, env)
    shared = [await store.get_block(block_id) for block_id in body.block_ids or []]
    blocks = []
    for index, spec in enumerate(body.memory_blocks or []):
        try:
            blocks.append(Block(spec.label, spec.value, spec.description,
                                spec.limit or DEFAULT_BLOCK_LIMIT,
                                spec.read_only))
        except ValueError as exc:
            raise unprocessable(f"memory_blocks.{index}", exc) from exc
    config = body.llm_config
    endpoint = runtime.settings.model_options()
    rules = with_default_approvals(body.tool_rules or [], await runtime.store.list_tools(names))
    stored: list[str] = []  # the new agent's id, once its settings passed

    async def write(draft: Agent) -> None:
        """Store the checked agent as Letta describes it: its record with the request's
        fields, its own blocks, the shared ones linked, its opening messages."""
        stored.append(draft.id)
        await _store_agent(runtime, body, draft, blocks=blocks, shared=shared, env=env,
                           settings=settings, embedding=embedding)

    try:
        await runtime.agents.create(
            handle, write=write, tools=tools, system=body.system or DEFAULT_SYSTEM,
            name=body.name,
            # the shared blocks too, so the stored system prompt renders them
            blocks=[*blocks, *map(block_from_record, shared)],
            agent_type=body.agent_type, tool_rules=rules,
            include_base_tools=body.include_base_tools, tags=body.tags or (),
            timezone=body.timezone or "UTC",
            include_multi_agent_tools=body.include_multi_agent_tools,
            context_window=body.context_window_limit or (
                config.context_window if config else None),
            max_tokens=settings.get("max_tokens") or body.max_tokens or (
                config.max_tokens if config else None),
            parallel_tool_calls=_first_set(
                settings.get("parallel_tool_calls"), body.parallel_tool_calls,
                config.parallel_tool_calls if config else None, True),
            model_settings=settings.get("model_settings"),
            base_url=endpoint.get("base_url"), api_key=endpoint.get("api_key"),
            enable_sleeptime=bool(body.enable_sleeptime))
    except ConfigError as exc:
        if stored:  # not a setting of the request: raised while storing it
            raise
        raise unprocessable(_field_of(str(exc)), exc) from exc
    return stored[0]


async def _store_agent(runtime: Runtime, body: CreateAgent, draft: Agent, *,
                       blocks: list[Block], shared: list[BlockRecord], env: dict[str, str],
                       settings: dict[str, Any], embedding: dict[str, Any]) -> None:
    """Write a new agent checked in memory: a 422 for a window too small for its system
    prompt and tools, else its record, blocks and opening messages (all of it, or none)."""
    store = runtime.store
    config = body.llm_config
    try:
        draft.check_window()
    except SystemPromptTooLarge as exc:
        raise unprocessable("context_window_limit", exc) from exc
    all_names = list(draft.tools)
    if body.include_base_tools:  # a stored agent also gets the tools that search the store
        all_names += [n for n in draft.agent_type.stored_memory_tools if n not in all_names]
    opening = [draft.messages[0], *initial_messages(body.initial_message_sequence)]
    for message in opening:
        message_tokens(message, draft.model.name)
    record = AgentRecord(
        name=draft.name, id=draft.id, agent_type=draft.agent_type.name, system=draft.system,
        description=body.description, model=draft.model.name,
        llm_config={"model": draft.model.name, "context_window": draft.context_window,
                    "context_window_override": body.context_window_limit or (
                        config.context_window if config else None),
                    "max_tokens": draft.max_tokens,
                    "parallel_tool_calls": draft.parallel_tool_calls,
                    "model_settings": settings_dict(draft.model_settings)},
        embedding_config=embedding,
        tool_rules=merged_rules([rule.model_dump(mode="json") for rule in draft.tool_rules]),
        tool_names=all_names, tags=list(draft.tags), metadata=body.metadata or {},
        message_buffer_autoclear=draft.agent_type.clear_after_run,
        timezone=body.timezone or "UTC", in_context_message_ids=[m.id for m in opening])
    record.extra = {**replace_env(record, env), **_asked(body, settings)}
    await store.create_agent(record, [block_record(b) for b in draft.blocks[:len(blocks)]])
    try:
        await store.append_step(record.id, opening)
        for block in shared:
            await store.attach_block(record.id, block.id)
        if body.enable_sleeptime:  # a memory agent sharing its blocks (as Letta makes one)
            await set_sleeptime(runtime, record.id, True)
    except BaseException:
        await store.delete_agent(record.id, delete_orphan_blocks=True)
        raise


def _not_deleted(runtime: Runtime, handle: str) -> None:
    """A 422 for a handle of a provider deleted from ``/v1/providers``."""
    prefix = handle.partition("/")[0]
    if runtime.providers.deleted(prefix):
        raise unprocessable("model", f"unknown model {handle!r}: its provider {prefix!r} "
                                     "was deleted")


async def update_agent(runtime: Runtime, agent_id: str, body: UpdateAgent) -> None:
    """Apply a PATCH: validate every field, write the record, then change the live agent."""
    agent = await runtime.agent(agent_id)
    if body.model or body.llm_config:
        handle = model_handle(body.model, body.llm_config, agent.model.name)
        await runtime.providers.refresh_for(handle)  # one added on another process resolves
        _not_deleted(runtime, handle)
    if agent.running:
        raise HTTPException(409, detail=f"agent {agent_id!r} is running; modify it when the "
                                        "run ends (or cancel it)")
    record = await runtime.store.get_agent(agent_id)
    fields = body.model_fields_set
    changes: dict[str, Any] = {}
    live: dict[str, Any] = {}
    env = agent_env(record)
    # As in Letta: the variables given replace the agent's; ``secrets`` wins over the old name.
    new_env = body.secrets if body.secrets is not None else body.tool_exec_environment_variables
    if new_env is not None:
        env = new_env
        changes["extra"] = replace_env(record, new_env)
    if "name" in fields and body.name:
        changes["name"] = live["name"] = body.name
    if "system" in fields and body.system is not None:
        changes["system"] = live["system"] = body.system
    for name in ("description", "metadata"):
        if name in fields:
            changes[name] = getattr(body, name) if name != "metadata" else body.metadata or {}
    if "tags" in fields:
        changes["tags"] = live["tags"] = list(body.tags or [])
    if body.model or body.llm_config:
        handle = model_handle(body.model, body.llm_config, agent.model.name)
        try:
            live["model"] = resolve_model(handle, **runtime.settings.model_options())
        except ConfigError as exc:
            raise unprocessable("model", exc) from exc
        changes["model"] = handle
        changes["llm_config"] = {"model": handle, "context_window": agent.context_window,
                                 "context_window_override": None,
                                 "max_tokens": agent.max_tokens,
                                 "parallel_tool_calls": agent.parallel_tool_calls,
                                 "model_settings": settings_dict(agent.model_settings)}
    if "tool_rules" in fields:
        try:
            dumped = merged_rules([rule.model_dump(mode="json")
                                   for rule in parse_rules(body.tool_rules or [])])
        except ConfigError as exc:
            raise unprocessable("tool_rules", exc) from exc
        live["tool_rules"] = parse_rules(dumped)
        changes["tool_rules"] = dumped
    await _update_model_fields(runtime, agent, body, record, changes, live)
    if body.context_window_limit is not None:
        _check_window(agent, body.context_window_limit)
        live["context_window"] = body.context_window_limit
        changes["llm_config"] = {**record.llm_config, **changes.get("llm_config", {}),
                                 "context_window": body.context_window_limit,
                                 "context_window_override": body.context_window_limit}
    if "tool_ids" in fields:
        names = await tool_names(runtime, [], body.tool_ids or [])
        live["tools"] = tool_map(await runtime.bind_tools(names, env))
        changes["tool_names"] = names
    elif new_env is not None:  # the same tools, their calls with the new variables
        live["tools"] = {**agent.tools,
                         **tool_map(await runtime.bind_tools(record.tool_names, env))}
    if changes:
        await runtime.store.update_agent(agent_id, **changes)
    if body.enable_sleeptime is not None:
        await set_sleeptime(runtime, agent_id, body.enable_sleeptime)
    apply_live(agent, live)


def _check_window(agent: Agent, window: int) -> None:
    """A 422 for a window too small for the agent's system prompt and tools (as they are
    now), before anything is stored."""
    try:
        agent.check_window(window)
    except SystemPromptTooLarge as exc:
        raise unprocessable("context_window_limit", exc) from exc


def apply_live(agent: Agent, live: dict[str, Any]) -> None:
    """Change the live agent to match what was stored; the system prompt recompiles."""
    for name, value in live.items():
        setattr(agent, name, value)
    agent.memory_changed()


def set_tools(agent: Agent, tools: dict[str, Tool]) -> None:
    agent.tools = tools
    agent.memory_changed()


async def _update_model_fields(runtime: Runtime, agent: Agent, body: UpdateAgent,
                         record: AgentRecord, changes: dict[str, Any],
                         live: dict[str, Any]) -> None:
    """A PATCH's ``model_settings``, ``response_format`` and ``embedding``."""
    fields = body.model_fields_set
    handle = changes.get("model") or record.model or ""
    settings = model_settings(body.model_settings, body.response_format,
                              handle.partition("/")[0], agent.model_settings)
    extra = {**changes.get("extra", record.extra), **_asked(body, settings)}
    if extra != record.extra:
        changes["extra"] = extra
    if settings:
        live.update(settings)
        config = {**record.llm_config, **changes.get("llm_config", {}), **settings}
        if "model_settings" in settings:
            config["model_settings"] = settings_dict(settings["model_settings"])
        changes["llm_config"] = config
    if "embedding" in fields:
        await runtime.providers.refresh_for(body.embedding)  # a provider added elsewhere?
        changes["embedding_config"] = await embedding_config(runtime.embedders,
                                                             body.embedding, None)
        # An archive the agent makes from now on is embedded with this model.
        live["embedder"] = runtime.embedders.get(changes["embedding_config"])


def _asked(body: CreateAgent | UpdateAgent, settings: dict[str, Any]) -> dict[str, Any]:
    """What the agent's state shows of ``model_settings`` and ``response_format``."""
    shown: dict[str, Any] = {}
    if body.model_settings is not None:
        shown["model_settings"] = {k: v for k, v in body.model_settings.items()
                                   if v is not None}
    chosen = (body.model_settings or {}).get("response_format") or body.response_format
    if chosen is not None:
        shown["response_format"] = chosen
    return shown


def _first_set(*values: bool | None) -> bool:
    return next(v for v in values if v is not None)


def _field_of(message: str) -> str:
    """Which request field a library error is about (it names it in its message)."""
    for name in ("agent_type", "tool_rules", "model", "max_tokens", "context_window", "tools",
                 "timezone"):
        if message.startswith(name) or f" {name}" in message:
            return "context_window_limit" if name == "context_window" else name
    if "block" in message:
        return "memory_blocks"
    return "body"
