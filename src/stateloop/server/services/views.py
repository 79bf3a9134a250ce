"""Store records as Letta's response objects (AgentState, Block, Tool, Run, Step, Passage)."""

from __future__ import annotations

import math
from typing import Any

from ...approvals import PendingApproval
from ...deepjson import MAX_DEPTH, cut, deeper_than
from ...llm.registered import endpoint_type
from ...store import (
    AgentRecord,
    BlockRecord,
    IdentityRecord,
    PassageRecord,
    RunRecord,
    StepRecord,
    ToolRecord,
)
from ...store.groups import GroupRecord
from ..models.responses import iso
from .callbacks import CALLBACK_KEY, callback_fields
from .messages import SEND_MESSAGE, call_frame
from .relationships import EVERY
from .tool_env import stored_env

# Letta's model settings of each endpoint type: (its provider_type, the fields it adds to
# max_output_tokens, parallel_tool_calls and temperature); a type not here has none of them.
_PLAIN = ("response_format",)
_SETTINGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "openai": ("openai", ("reasoning", "strict", "response_format")),
    "anthropic": ("anthropic", ("thinking", "verbosity", "effort", "strict", "response_format")),
    "minimax": ("anthropic", ("thinking", "verbosity", "strict", "response_format")),
    "google_ai": ("google_ai", ("thinking_config", "strict", "response_format")),
    "azure": ("azure", _PLAIN), "xai": ("xai", _PLAIN), "groq": ("groq", _PLAIN),
    "deepseek": ("deepseek", _PLAIN), "together": ("together", _PLAIN),
    "bedrock": ("bedrock", _PLAIN), "openrouter": ("openrouter", _PLAIN),
    "zai": ("zai", ("thinking", "response_format")),
    "zai_coding": ("zai", ("thinking", "response_format")), "baseten": ("baseten", ()),
}
_SGLANG = ("sglang", ("reasoning", "strict", "response_format", "tool_call_parser"))
TOO_DEEP = f"(nested deeper than {MAX_DEPTH} levels: not shown)"


def shown(value: Any) -> Any:
    """A stored free-form value (metadata, a JSON schema) as a response can carry it.

    Rows written before request bodies were checked may nest hundreds of levels, deeper than
    the response serializer goes: such a value is shown cut at ``MAX_DEPTH``, each deeper
    container replaced by a note, so listing still works. The row itself keeps everything.
    """
    return cut(value, MAX_DEPTH, TOO_DEEP) if deeper_than(value, MAX_DEPTH) else value


def block_view(block: BlockRecord) -> dict[str, Any]:
    return {"id": block.id, "label": block.label, "value": block.value, "limit": block.limit,
            "description": block.description, "read_only": block.read_only,
            "hidden": block.hidden, "preserve_on_migration": block.preserve_on_migration,
            "metadata": shown(block.metadata), "is_template": False, "tags": []}


def tool_view(tool: ToolRecord) -> dict[str, Any]:
    return {"id": tool.id, "name": tool.name, "description": tool.description,
            "tool_type": tool.tool_type, "source_type": tool.source_type,
            "source_code": tool.source_code, "json_schema": shown(tool.json_schema),
            "args_json_schema": shown(tool.args_json_schema), "tags": tool.tags,
            "return_char_limit": tool.return_char_limit or 50_000,
            "default_requires_approval": tool.default_requires_approval,
            "enable_parallel_execution": tool.enable_parallel_execution,
            "pip_requirements": tool.pip_requirements, "npm_requirements": tool.npm_requirements,
            "metadata_": shown(tool.metadata)}


def llm_config(record: AgentRecord) -> dict[str, Any]:
    handle = record.model or ""
    name = handle.partition("/")[2]
    config = record.llm_config
    return {"model": name or handle, "handle": handle,
            "model_endpoint_type": endpoint_type(handle),
            "model_endpoint": None,
            "context_window": config.get("context_window") or 8192,
            "max_tokens": config.get("max_tokens"),
            "parallel_tool_calls": config.get("parallel_tool_calls"),
            **_sampling(config.get("model_settings") or {})}


def _sampling(settings: dict[str, Any]) -> dict[str, Any]:
    """An agent's model settings as Letta's ``LLMConfig`` fields."""
    budget = settings.get("thinking_budget")
    return {"temperature": settings.get("temperature", 1.0),  # the providers' default
            "reasoning_effort": settings.get("reasoning_effort"),
            "enable_reasoner": budget is not None or "reasoning_effort" in settings,
            "max_reasoning_tokens": budget or 0,
            "response_format": shown(settings.get("response_format"))}


def model_settings(record: AgentRecord, config: dict[str, Any]) -> dict[str, Any]:
    """The ``model_settings`` the agent was given, or, given none, the provider's settings
    as Letta fills them in from the agent's ``llm_config``."""
    asked = record.extra.get("model_settings")
    if asked is not None:
        return shown(asked)
    # A stored value that cannot be shown is marked in llm_config; here the default stands.
    limit, temperature = config["max_tokens"], config["temperature"]
    kind = config["model_endpoint_type"]
    provider, fields = (_SGLANG if kind == "openai" and config["handle"].startswith("sglang/")
                        else _SETTINGS.get(kind, ("", ())))
    found: dict[str, Any] = {
        "max_output_tokens": limit if isinstance(limit, int) and limit > 0 else 4096,
        "parallel_tool_calls": bool(config["parallel_tool_calls"])}
    if not provider:  # a type Letta has no settings for: its base ModelSettings
        return found
    found["provider_type"] = provider
    found["temperature"] = (temperature if isinstance(temperature, int | float)
                            and math.isfinite(temperature) else 1.0)
    budget = config["max_reasoning_tokens"] if config["enable_reasoner"] else 1024
    thinking = "enabled" if config["enable_reasoner"] else "disabled"
    extras = {
        "reasoning": {"reasoning_effort": config["reasoning_effort"] or "minimal"},
        "strict": False, "response_format": None, "verbosity": None, "effort": None,
        "tool_call_parser": None,
        "thinking": {"type": thinking, "clear_thinking": False} if provider == "zai" else {
            "type": thinking, "budget_tokens": config["max_reasoning_tokens"] or 1024},
        # unset: Letta's default budget
        "thinking_config": {"include_thoughts": budget != 0, "thinking_budget": budget}}
    return {**found, **{name: extras[name] for name in fields}}


def embedding_config(record: AgentRecord) -> dict[str, Any] | None:
    """The embedding the agent asked for; ``None`` when it asked for none, as in Letta."""
    config = record.embedding_config
    if not config:
        return None
    return {"embedding_endpoint_type": config.get("embedding_endpoint_type", "openai"),
            "embedding_model": config.get("embedding_model", "all-MiniLM-L6-v2-int8"),
            "embedding_dim": config.get("embedding_dim", 384),
            "embedding_chunk_size": config.get("embedding_chunk_size", 300),
            "handle": config.get("handle")}


def agent_view(record: AgentRecord, blocks: list[BlockRecord], tools: list[ToolRecord],
               managed: GroupRecord | None = None,
               relationships: frozenset[str] = EVERY) -> dict[str, Any]:
    """Letta's ``AgentState``; ``managed`` is the group the agent manages (its sleeptime
    group, say). A relationship not among ``relationships`` shows empty, as Letta leaves
    it (``services.relationships``); ``blocks``, ``tools`` and ``managed`` are shown only
    when asked for."""
    block_views = [block_view(b) for b in blocks] if "agent.blocks" in relationships else []
    env = env_views(record) if "agent.secrets" in relationships else []
    group = (group_view(managed) if managed is not None
             and "agent.managed_group" in relationships else None)
    by_name = {t.name: t for t in tools} if "agent.tools" in relationships else {}
    pending = None
    config = llm_config(record)
    if record.pending_approval and "agent.pending_approval" in relationships:
        approval = PendingApproval.from_dict(record.pending_approval)
        calls = approval.requested_calls
        if calls:
            pending = call_frame(f"message-{approval.run_id}", calls, approval.created_at, 0,
                                 approval.run_id, approval=True)
    return {
        "id": record.id, "name": record.name, "agent_type": record.agent_type,
        "description": record.description, "system": record.system,
        "model": record.model, "llm_config": config,
        "embedding_config": embedding_config(record),
        "embedding": (record.embedding_config or {}).get("handle"),
        "model_settings": model_settings(record, config),
        "response_format": shown(record.extra.get("response_format")),
        "blocks": block_views,
        "memory": {"agent_type": record.agent_type, "blocks": block_views, "file_blocks": []},
        "tools": [tool_view(by_name[name]) for name in record.tool_names if name in by_name],
        "tool_rules": record.tool_rules,
        "tags": record.tags if relationships & {"agent.tags", "agent.blocks"} else [],
        "sources": [],
        "metadata": shown(record.metadata), "message_ids": record.in_context_message_ids,
        "message_buffer_autoclear": record.message_buffer_autoclear,
        "enable_sleeptime": record.enable_sleeptime, "timezone": record.timezone,
        "created_at": iso(record.created_at), "updated_at": iso(record.updated_at),
        "last_run_completion": iso(record.last_run_completion),
        "last_run_duration_ms": (int(record.last_run_duration_ms)
                                 if record.last_run_duration_ms is not None else None),
        "last_stop_reason": record.last_stop_reason,
        "pending_approval": pending,
        "identities": [], "identity_ids": [], "secrets": env,
        "tool_exec_environment_variables": env,
        "multi_agent_group": group, "managed_group": group,
    }


def group_view(record: GroupRecord) -> dict[str, Any]:
    """Letta's ``Group``."""
    return {"id": record.id, "manager_type": record.manager_type,
            "agent_ids": record.agent_ids, "description": record.description,
            "project_id": record.project_id, "template_id": None, "base_template_id": None,
            "deployment_id": None, "shared_block_ids": record.shared_block_ids,
            "manager_agent_id": record.manager_agent_id,
            "termination_token": record.termination_token, "max_turns": record.max_turns,
            "sleeptime_agent_frequency": record.sleeptime_agent_frequency,
            "turns_counter": record.turns_counter,
            "last_processed_message_id": record.last_processed_message_id,
            "max_message_buffer_length": None, "min_message_buffer_length": None,
            "hidden": record.hidden}


def env_views(record: AgentRecord) -> list[dict[str, Any]]:
    """The agent's tool variables as Letta's ``AgentEnvironmentVariable``s; as Letta's
    AgentState does, they show their values."""
    return [{"id": variable["id"], "key": variable["key"], "value": variable["value"],
             "description": None, "agent_id": record.id} for variable in stored_env(record)]


DEFAULT_REQUEST_CONFIG: dict[str, Any] = {
    "use_assistant_message": True, "assistant_message_tool_name": SEND_MESSAGE,
    "assistant_message_tool_kwarg": "message", "include_return_message_types": None}


def request_config(body: Any) -> dict[str, Any]:
    """Letta's ``LettaRequestConfig`` of a message request."""
    return {**DEFAULT_REQUEST_CONFIG, "use_assistant_message": body.use_assistant_message,
            "include_return_message_types": body.include_return_message_types}


def run_view(run: RunRecord) -> dict[str, Any]:
    duration = None
    if run.completed_at is not None:
        duration = int((run.completed_at - (run.started_at or run.created_at)) * 1e9)
    return {"id": run.id, "agent_id": run.agent_id, "status": run.status,
            "stop_reason": run.stop_reason, "created_at": iso(run.created_at),
            "completed_at": iso(run.completed_at), "metadata": shown(_run_metadata(run)),
            "background": run.metadata.get("background"), "total_duration_ns": duration,
            "request_config": shown(run.metadata.get("request_config")
                                    or DEFAULT_REQUEST_CONFIG),
            "conversation_id": None, **callback_fields(run.metadata)}


def _run_metadata(run: RunRecord) -> dict[str, Any]:
    """The run's metadata (its request config and callback are shown apart); a failed
    run's says why, under ``error``, as Letta's do."""
    metadata = {k: v for k, v in run.metadata.items()
                if k not in ("request_config", CALLBACK_KEY)}
    if run.status == "failed" and run.error and "error" not in metadata:
        metadata["error"] = run.error
    return metadata


def usage_view(run: RunRecord) -> dict[str, Any]:
    usage = run.usage
    return {"completion_tokens": usage.output_tokens, "prompt_tokens": usage.input_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens,
                                      "cache_read_tokens": usage.cached_input_tokens,
                                      "cache_creation_tokens": usage.cache_write_tokens},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens}}


def step_view(step: StepRecord) -> dict[str, Any]:
    usage = step.usage
    provider = step.provider or (step.model or "").partition("/")[0] or None
    return {"id": step.id, "run_id": step.run_id, "agent_id": step.agent_id,
            "model": step.model, "model_handle": step.model, "provider_name": provider,
            "prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens, "cached_input_tokens": usage.cached_input_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "status": "failed" if step.error else "success", "stop_reason": None,
            "error_type": None, "error_data": {"message": step.error} if step.error else None,
            "feedback": step.metadata.get("feedback"), "tags": step.metadata.get("tags", []),
            "trace_id": step.metadata.get("trace_id")}


def passage_view(passage: PassageRecord,
                 embedding_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Letta's ``Passage``, with its vector and its archive's ``embedding_config``."""
    vector = None if passage.embedding is None else [float(x) for x in passage.embedding]
    return {"id": passage.id, "text": passage.text, "tags": passage.tags,
            "created_at": iso(passage.created_at), "metadata": shown(passage.metadata),
            "archive_id": passage.archive_id, "embedding": vector,
            "embedding_config": embedding_config, "is_deleted": False}


def identity_view(identity: IdentityRecord) -> dict[str, Any]:
    """Letta's ``Identity``."""
    return {"id": identity.id, "identifier_key": identity.identifier_key,
            "name": identity.name, "identity_type": identity.identity_type,
            "project_id": identity.project_id, "agent_ids": identity.agent_ids,
            "block_ids": identity.block_ids, "organization_id": None,
            "properties": shown(identity.properties)}
