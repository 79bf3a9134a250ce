"""Agents written as an Agent File that Letta 0.16.8's importer accepts (its
``AgentFileSchema``: every key it knows, none it does not), with the file's own ids —
``agent-0``, ``block-0``, ``tool-0``, ``message-0`` — as Letta writes them. Blocks shared by
agents of the file are written once. Tool variables (secrets) are written with empty values
unless asked for. The in-context messages are written, as Letta does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..llm.providers import CATALOGUE
from ..llm.registered import endpoint_type, provider_type
from ..messages import Message
from ..persistence import get_store, stored_state
from ..store.records import AgentRecord, BlockRecord, GroupRecord, ToolRecord
from ..tools.builtin import builtin_names, builtin_tool, builtin_tool_type
from .groups import group_entry
from .letta_messages import to_letta
from .plan import AGENT_KEY, ENV_KEY, LLM_KEY
from .tools import tool_entry

REVISION = "b1c2d3e4f5a6"  # the Alembic revision of Letta's schema the fixtures carry


@dataclass(slots=True)
class Snapshot:
    """One agent as it is exported: its record, blocks, in-context messages and tools."""

    record: AgentRecord
    blocks: list[BlockRecord]
    messages: list[Message]
    tools: list[ToolRecord]


async def stored_snapshot(store: Any, agent_id: str) -> Snapshot:
    """The agent as the store holds it."""
    db = await get_store(store)
    record = await db.get_agent(agent_id)
    _, messages, _ = await stored_state(db, record)
    blocks = await db.list_blocks(record.id)
    records = {t.name: t for t in await db.list_tools(
        [n for n in record.tool_names if n not in builtin_names()])}
    tools = [records.get(name) or builtin_record(name) for name in record.tool_names
             if name in records or name in builtin_names()]
    return Snapshot(record, blocks, messages, tools)


def builtin_record(name: str) -> ToolRecord:
    tool = builtin_tool(name)
    return ToolRecord(name, tool.spec().to_dict(), description=tool.description,
                      tool_type=builtin_tool_type(name), binding=f"builtin:{name}")


def agent_file(snapshots: list[Snapshot], *, groups: Sequence[GroupRecord] = (),
               include_secrets: bool = False, strip_messages: bool = False,
               created_at: float | None = None,
               skills: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The Agent File of these agents and the groups they manage (their members among
    ``snapshots``), and ``skills`` as given, as a JSON-ready dict."""
    ids = _Ids()
    blocks: dict[str, dict[str, Any]] = {}
    tools: dict[str, dict[str, Any]] = {}
    agents = []
    for snapshot in snapshots:
        for block in snapshot.blocks:
            if block.id not in blocks:
                blocks[block.id] = _block(block, ids.of("block", block.id))
        for tool in snapshot.tools:
            if tool.name not in tools:
                tools[tool.name] = tool_entry(tool, ids.of("tool", tool.name))
        agents.append(_agent(snapshot, ids, include_secrets, strip_messages))
    exported = {snapshot.record.id: agent for snapshot, agent in zip(snapshots, agents,
                                                                      strict=True)}
    group_entries = []
    for group in groups:
        group_entries.append(group_entry(group, ids.of("group", group.id), ids))
        if group.manager_agent_id in exported:
            exported[group.manager_agent_id]["group_ids"].append(group_entries[-1]["id"])
    moment = datetime.fromtimestamp(created_at, UTC) if created_at else datetime.now(UTC)
    return {"agents": agents, "groups": group_entries, "blocks": list(blocks.values()), "files": [],
            "sources": [], "tools": list(tools.values()), "mcp_servers": [], "skills": list(skills),
            "metadata": {"revision_id": REVISION}, "created_at": moment.isoformat()}


class _Ids:
    """The file's ids, numbered per kind in the order things are met."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], str] = {}
        self._count: dict[str, int] = {}

    def of(self, kind: str, key: str) -> str:
        if (kind, key) not in self._seen:
            number = self._count.get(kind, 0)
            self._count[kind] = number + 1
            self._seen[kind, key] = f"{kind}-{number}"
        return self._seen[kind, key]


def _block(block: BlockRecord, file_id: str) -> dict[str, Any]:
    extra = block.extra
    return {"value": block.value, "limit": block.limit, "project_id": extra.get("project_id"),
            "template_name": extra.get("template_name"),
            "is_template": bool(extra.get("is_template", False)),
            "template_id": extra.get("template_id"),
            "base_template_id": extra.get("base_template_id"),
            "deployment_id": extra.get("deployment_id"), "entity_id": extra.get("entity_id"),
            "preserve_on_migration": block.preserve_on_migration, "label": block.label,
            "read_only": block.read_only, "description": block.description,
            "metadata": block.metadata or {}, "hidden": block.hidden, "id": file_id}


def _agent(snapshot: Snapshot, ids: _Ids, include_secrets: bool, strip_messages: bool
           ) -> dict[str, Any]:
    record = snapshot.record
    agent_id = ids.of("agent", record.id)
    kept = record.extra.get(AGENT_KEY) or {}
    variables = {v["key"]: v["value"] if include_secrets else ""
                 for v in record.extra.get(ENV_KEY) or []}
    messages = snapshot.messages[:1] if strip_messages else snapshot.messages
    waiting = {c["id"] for c in (record.pending_approval or {}).get("calls", [])}
    model = _llm_config(record)
    entries = [to_letta(m, ids.of("message", m.id), agent_id, model["model"],
                        approval_request=bool(m.tool_calls) and m.tool_calls[0].id in waiting)
               for m in messages]
    return {
        "name": record.name, "memory_blocks": [], "tools": [],
        "tool_ids": [ids.of("tool", t.name) for t in snapshot.tools], "source_ids": [],
        "folder_ids": None, "block_ids": [ids.of("block", b.id) for b in snapshot.blocks],
        "tool_rules": record.tool_rules, "tags": list(record.tags), "system": record.system,
        "agent_type": record.agent_type, "initial_message_sequence": None,
        "include_base_tools": False, "include_multi_agent_tools": False,
        "include_base_tool_rules": False, "include_default_source": False,
        "description": record.description, "metadata": record.metadata or None,
        "llm_config": model, "embedding_config": _embedding_config(record), "model": None,
        "embedding": None, "model_settings": None, "context_window_limit": None,
        "embedding_chunk_size": None, "max_tokens": None, "max_reasoning_tokens": None,
        "enable_reasoner": False, "reasoning": None, "from_template": None, "template": False,
        "project": None, "tool_exec_environment_variables": variables, "secrets": None,
        "memory_variables": None, "project_id": None, "template_id": None,
        "base_template_id": None, "identity_ids": None,
        "message_buffer_autoclear": record.message_buffer_autoclear,
        "enable_sleeptime": False, "response_format": record.extra.get("response_format"),
        "timezone": record.timezone or "UTC",
        "max_files_open": kept.get("max_files_open", 5),
        "per_file_view_window_char_limit": kept.get("per_file_view_window_char_limit", 15000),
        "hidden": None, "parallel_tool_calls": None, "id": agent_id,
        "in_context_message_ids": [entry["id"] for entry in entries], "messages": entries,
        "files_agents": [], "group_ids": [],
    }


def _llm_config(record: AgentRecord) -> dict[str, Any]:
    """Letta's ``LLMConfig``: the file's own when the agent came from one, with what
    stateloop changed since written over it."""
    ours = record.llm_config
    handle = record.model or ours.get("model") or "openai/gpt-4o-mini"
    provider, _, name = handle.partition("/") if "/" in handle else ("openai", "", handle)
    base = record.extra.get(LLM_KEY) or {}
    same = base.get("handle") == handle
    kind = CATALOGUE.get(provider)
    # The provider's public address (never one the operator set), as Letta writes it.
    endpoint = ("https://api.anthropic.com/v1" if provider == "anthropic"
                else kind.base_url if kind is not None else None)
    config = {
        "model": name, "display_name": None, "model_endpoint_type": endpoint_type(handle),
        "model_endpoint": endpoint, "provider_name": provider,
        "provider_category": "byok" if provider_type(provider) else "base",
        "model_wrapper": None, "context_window": 32000, "put_inner_thoughts_in_kwargs": False,
        "handle": handle, "temperature": 0.7, "max_tokens": None, "enable_reasoner": False,
        "reasoning_effort": None, "max_reasoning_tokens": 0, "frequency_penalty": None,
        "compatibility_type": None, "verbosity": None, "tier": None,
        "parallel_tool_calls": True,
        **(base if same else {}),
    }
    window = ours.get("context_window_override") or ours.get("context_window")
    if window:
        config["context_window"] = window
    config["max_tokens"] = ours.get("max_tokens")
    config["parallel_tool_calls"] = bool(ours.get("parallel_tool_calls", True))
    return config


def _embedding_config(record: AgentRecord) -> dict[str, Any]:
    given = record.embedding_config or {}
    return {"embedding_endpoint_type": "openai",
            "embedding_endpoint": "https://api.openai.com/v1",
            "embedding_model": "text-embedding-3-small", "embedding_dim": 1536,
            "embedding_chunk_size": 300, "handle": "openai/text-embedding-3-small",
            "batch_size": 32, "azure_endpoint": None, "azure_version": None,
            "azure_deployment": None, **given}
