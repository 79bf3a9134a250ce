"""Letta's response objects as pydantic models (``response_model=``), so the OpenAPI document
declares the shapes the views in ``services/views.py`` produce, with Letta's names and field types.

Each model has exactly its view's fields. Enumerations Letta declares (a run's status, a
tool's type) are plain strings here: the document promises the type, the values are Letta's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


def iso(timestamp: float | None) -> str | None:
    """An epoch time as the ISO-8601 string Letta sends."""
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


class Response(BaseModel):
    # A view that grows a field its model lacks fails loudly (a 500 the tests see) instead of
    # the field being dropped from every answer without a word.
    model_config = ConfigDict(extra="forbid")


class Health(Response):
    status: str
    version: str  # of Letta's API
    stateloop_version: str


class Block(Response):
    id: str
    label: str | None = None
    value: str
    limit: int
    description: str | None = None
    read_only: bool = False
    hidden: bool | None = None
    preserve_on_migration: bool | None = None
    metadata: dict[str, Any] | None = None
    is_template: bool = False
    tags: list[str] | None = None


class Tool(Response):
    id: str
    name: str | None = None
    description: str | None = None
    tool_type: str
    source_type: str | None = None
    source_code: str | None = None
    json_schema: dict[str, Any] | None = None
    args_json_schema: dict[str, Any] | None = None
    tags: list[str]
    return_char_limit: int
    default_requires_approval: bool | None = None
    enable_parallel_execution: bool | None = None
    pip_requirements: list[Any] | None = None
    npm_requirements: list[Any] | None = None
    metadata_: dict[str, Any] | None = None


class Run(Response):
    id: str
    agent_id: str
    status: str
    stop_reason: str | None = None
    created_at: str
    completed_at: str | None = None
    metadata: dict[str, Any] | None = None
    background: bool | None = None
    total_duration_ns: int | None = None
    ttft_ns: int | None = None  # GET /v1/runs/{run_id} only: from the run's start
    request_config: dict[str, Any] | None = None
    conversation_id: str | None = None
    callback_url: str | None = None
    callback_sent_at: str | None = None
    callback_status_code: int | None = None
    callback_error: str | None = None


class PromptTokenDetails(Response):
    cached_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None


class CompletionTokenDetails(Response):
    reasoning_tokens: int | None = None


class UsageStatistics(Response):
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokenDetails | None = None
    completion_tokens_details: CompletionTokenDetails | None = None


class Step(Response):
    id: str
    run_id: str | None = None
    agent_id: str | None = None
    model: str | None = None
    model_handle: str | None = None
    provider_name: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_tokens: int | None = None
    status: str | None = None
    stop_reason: str | None = None
    error_type: str | None = None
    error_data: dict[str, Any] | None = None
    feedback: str | None = None
    tags: list[str] = []
    trace_id: str | None = None


class Passage(Response):
    id: str
    text: str
    tags: list[str] | None = None
    created_at: str | None = None
    metadata: dict[str, Any] | None = None
    archive_id: str | None = None
    embedding: list[float] | None
    embedding_config: dict[str, Any] | None
    is_deleted: bool = False


class ArchivalMemorySearchResult(Response):
    id: str
    content: str
    timestamp: str
    tags: list[str] = []


class ArchivalMemorySearchResponse(Response):
    count: int
    results: list[ArchivalMemorySearchResult]


class LLMConfig(Response):
    model: str
    handle: str | None = None
    model_endpoint_type: str
    model_endpoint: str | None = None
    context_window: int
    max_tokens: int | None = None
    parallel_tool_calls: bool | None = None
    temperature: float = 1.0
    reasoning_effort: str | None = None
    enable_reasoner: bool = False
    max_reasoning_tokens: int = 0
    response_format: dict[str, Any] | None = None


class EmbeddingConfig(Response):
    embedding_endpoint_type: str
    embedding_endpoint: str | None = None
    embedding_model: str
    embedding_dim: int
    embedding_chunk_size: int | None = None
    handle: str | None = None
    batch_size: int = 32


class Memory(Response):
    agent_type: str | None = None
    blocks: list[Block]
    file_blocks: list[Any] = []


class AgentEnvironmentVariable(Response):
    id: str
    key: str
    value: str
    description: str | None = None
    agent_id: str


class AgentRepositories(Response):
    """Letta Cloud's list of the git repositories attached to an agent."""
    repositories: list[dict[str, Any]]


class Provider(Response):
    """Letta's ``Provider``, without its keys: they are the operator's."""
    id: str
    name: str
    provider_type: str
    provider_category: str
    base_url: str | None = None
    region: str | None = None
    api_version: str | None = None
    organization_id: str | None = None
    updated_at: str | None = None
    last_synced: str | None = None


class Balance(Response):
    """Letta Cloud's credit balance: a server that sells no credits has none."""
    billing_tier: str
    total_balance: float
    monthly_credit_balance: float
    purchased_credit_balance: float


class QuotaBucket(Response):
    bucket: str
    dailyBucket: str | None = None


class ModelQuota(Response):
    """Letta Cloud's quota of its ``letta/*`` models (its field names, camelCase): a server
    that meters none has none."""
    lettaTier: QuotaBucket
    quotaWindowEnd: str | None = None
    dailyQuotaWindowEnd: str | None = None


class Group(Response):
    """Letta's multi-agent group (here: the sleeptime group an agent manages)."""

    id: str
    manager_type: Literal["round_robin", "supervisor", "dynamic", "sleeptime",
                          "voice_sleeptime", "swarm"]
    agent_ids: list[str]
    description: str
    project_id: str | None = None
    template_id: str | None = None
    base_template_id: str | None = None
    deployment_id: str | None = None
    shared_block_ids: list[str] = []
    manager_agent_id: str | None = None
    termination_token: str | None = None
    max_turns: int | None = None
    sleeptime_agent_frequency: int | None = None
    turns_counter: int | None = None
    last_processed_message_id: str | None = None
    max_message_buffer_length: int | None = None
    min_message_buffer_length: int | None = None
    hidden: bool | None = None


class AgentState(Response):
    id: str
    name: str
    agent_type: str
    description: str | None = None
    system: str
    model: str | None = None
    llm_config: LLMConfig
    embedding_config: EmbeddingConfig | None = None
    embedding: str | None = None
    model_settings: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    blocks: list[Block]
    memory: Memory
    tools: list[Tool]
    tool_rules: list[dict[str, Any]] | None = None
    tags: list[str]
    sources: list[Any]
    metadata: dict[str, Any] | None = None
    message_ids: list[str] | None = None
    message_buffer_autoclear: bool = False
    enable_sleeptime: bool | None = None
    timezone: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    last_run_completion: str | None = None
    last_run_duration_ms: int | None = None
    last_stop_reason: str | None = None
    pending_approval: dict[str, Any] | None = None
    identities: list[Any] = []
    identity_ids: list[str] = []
    secrets: list[AgentEnvironmentVariable] = []
    tool_exec_environment_variables: list[AgentEnvironmentVariable] = []
    multi_agent_group: Group | None = None
    managed_group: Group | None = None


class ContextWindowOverview(Response):
    context_window_size_max: int
    context_window_size_current: int
    num_messages: int
    num_archival_memory: int
    num_recall_memory: int
    num_tokens_external_memory_summary: int
    external_memory_summary: str
    num_tokens_system: int
    system_prompt: str
    num_tokens_core_memory: int
    core_memory: str
    num_tokens_memory_filesystem: int = 0
    memory_filesystem: str | None = None
    num_tokens_tool_usage_rules: int
    tool_usage_rules: str | None = None
    num_tokens_directories: int = 0
    directories: str | None = None
    num_tokens_summary_memory: int
    summary_memory: str | None = None
    num_tokens_functions_definitions: int
    functions_definitions: list[dict[str, Any]] | None = None
    num_tokens_messages: int
    messages: list[dict[str, Any]]  # stateloop's own message dicts, not Letta's Message


class LettaStopReason(BaseModel):  # a stream frame: it may carry more (seq_id, run_id)
    message_type: str = "stop_reason"
    stop_reason: str


class LettaUsageStatistics(BaseModel):
    message_type: str = "usage_statistics"
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    total_tokens: int | None = None
    step_count: int | None = None
    run_ids: list[str] | None = None


class LettaResponse(Response):
    messages: list[dict[str, Any]]  # Letta's message frames, by message_type
    stop_reason: LettaStopReason
    usage: LettaUsageStatistics


# --- catalog, steps and run metrics (routes/catalog.py, routes/steps.py, run_metrics.py) ---


class Model(Response):
    handle: str | None = None
    name: str
    display_name: str | None = None
    provider_type: str
    provider_name: str | None = None
    model_type: str = "llm"
    model: str
    model_endpoint_type: str
    model_endpoint: str | None = None
    context_window: int
    max_context_window: int
    max_tokens: int | None = None
    provider_category: str | None = None


class EmbeddingModel(Response):
    handle: str | None = None
    name: str
    display_name: str
    provider_type: str
    provider_name: str
    model_type: str = "embedding"
    embedding_endpoint_type: str
    embedding_endpoint: str | None = None
    embedding_model: str
    embedding_dim: int
    embedding_chunk_size: int | None = None


class RunMetrics(Response):
    id: str
    agent_id: str | None = None
    run_start_ns: int | None = None
    run_ns: int | None = None
    num_steps: int | None = None
    tools_used: list[str] | None = None


class StepMetrics(Response):
    id: str
    run_id: str | None = None
    agent_id: str | None = None
    step_start_ns: int | None = None
    llm_request_start_ns: int | None = None
    llm_request_ns: int | None = None
    tool_execution_ns: int | None = None
    step_ns: int | None = None


# --- identities (routes/identities.py) ---


class Identity(Response):
    id: str
    identifier_key: str
    name: str
    identity_type: str
    project_id: str | None = None
    agent_ids: list[str]
    block_ids: list[str]
    organization_id: str | None = None
    properties: list[dict[str, Any]] = []
