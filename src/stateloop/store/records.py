"""Plain records the store reads and writes; no SQL here, so every layer may import them."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from stateloop.messages import Message, Usage, new_id

DEFAULT_BLOCK_LIMIT = 100_000  # Letta's CORE_MEMORY_BLOCK_CHAR_LIMIT (0.16.8)

KEEP: Any = object()  # append_step leaves the pending approval as it is
APPEND: Any = object()  # append_step: the step's messages join the end of the context

Order = Literal["asc", "desc"]


@dataclass(frozen=True, slots=True)
class Page:
    """Which rows of a list, on its stable order: after and/or before a row (by id, relative
    to ``order``, as in Letta), at most ``limit``. The store reads it in SQL (paging.py)."""

    after: str | None = None
    before: str | None = None
    limit: int | None = None
    order: Order = "asc"


EVERYTHING = Page()

RUN_STATUSES = ("created", "running", "completed", "failed", "cancelled")


def new_record_id(kind: str) -> str:
    """A persistent id in Letta's format, e.g. ``agent-<uuid4>``."""
    return new_id(kind)


_STEP_IDS = uuid.UUID("7b4e1f52-3c1d-4f7a-9d2e-5a6b8c0d1e2f")


def step_record_id(run_id: str, index: int) -> str:
    """The id of step ``index`` (0-based) of a run: derived, not drawn, so the step's
    messages can name it while the step is still under way (Letta streams ``step_id``)."""
    return f"step-{uuid.uuid5(_STEP_IDS, f'{run_id}/{index}')}"


@dataclass(slots=True)
class AgentRecord:
    """Everything a persisted agent is, including every other .af field (in ``extra``)."""

    name: str
    id: str = field(default_factory=lambda: new_record_id("agent"))
    agent_type: str = "letta_v1_agent"
    description: str | None = None
    system: str = ""
    model: str | None = None  # a handle such as "openai/gpt-4o-mini"
    llm_config: dict[str, Any] = field(default_factory=dict)
    embedding_config: dict[str, Any] = field(default_factory=dict)
    tool_rules: list[dict[str, Any]] = field(default_factory=list)  # Letta's JSON rule dicts
    tool_names: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    in_context_message_ids: list[str] = field(default_factory=list)  # ordered
    message_buffer_autoclear: bool = False
    enable_sleeptime: bool = False
    timezone: str | None = "UTC"
    extra: dict[str, Any] = field(default_factory=dict)  # remaining .af fields, kept verbatim
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    last_run_completion: float | None = None
    last_run_duration_ms: float | None = None
    last_stop_reason: str | None = None
    pending_approval: dict[str, Any] | None = None  # a step paused for a human, as data


@dataclass(slots=True)
class BlockRecord:
    """A core-memory block; shared between agents through the link table."""

    label: str
    value: str = ""
    limit: int = DEFAULT_BLOCK_LIMIT
    id: str = field(default_factory=lambda: new_record_id("block"))
    description: str | None = None
    read_only: bool = False
    hidden: bool | None = None
    preserve_on_migration: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # template fields and the like from .af
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class RunRecord:
    """One run of an agent: status, stop reason, timing and summed usage."""

    agent_id: str
    id: str = field(default_factory=lambda: new_record_id("run"))
    status: str = "created"
    stop_reason: str | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    step_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    completed_at: float | None = None
    first_seq: int = 0  # its messages all have a higher seq (set by the store)


@dataclass(slots=True)
class StepRecord:
    """One model call: which model, how many tokens, how long it took."""

    run_id: str | None
    agent_id: str = ""  # filled in by ``append_step``
    id: str = field(default_factory=lambda: new_record_id("step"))
    index: int = 0  # 0-based position in its run
    model: str | None = None
    provider: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_ms: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class PassageRecord:
    """An archival passage with its embedding and the model that made it."""

    archive_id: str
    text: str
    embedding: list[float] | None = None  # or a numpy row; stored as float32
    embedding_model: str | None = None
    embedding_dim: int | None = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: new_record_id("passage"))
    created_at: float = field(default_factory=time.time)
    seq: int | None = None  # insertion order, set by the store


@dataclass(slots=True)
class ArchiveRecord:
    """A named archival store; agents reach it through attachments (Letta's Archive)."""

    name: str
    description: str | None = None
    vector_db_provider: str = "native"  # passages and vectors live in this database
    embedding_config: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: new_record_id("archive"))
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class VectorBatch:
    """Passage vectors as stored, for building an in-memory index without per-row objects."""

    seqs: list[int]
    ids: list[str]
    vectors: bytes  # float32, row-major, len(ids) * dim * 4 bytes
    dim: int
    model: str | None
    tags: list[list[str]]
    created_at: list[float]


@dataclass(slots=True)
class ToolRecord:
    """A registered tool: its schema, how to bind it to code, and its flags."""

    name: str
    json_schema: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: new_record_id("tool"))
    description: str | None = None
    tool_type: str = "custom"  # Letta's: custom, letta_core, letta_memory_core, ...
    source_type: str | None = "python"
    source_code: str | None = None
    binding: str | None = None  # e.g. "builtin:archival_memory_search" or "python:pkg.mod:func"
    args_json_schema: dict[str, Any] | None = None
    return_char_limit: int | None = None
    default_requires_approval: bool | None = None
    enable_parallel_execution: bool | None = None
    tags: list[str] = field(default_factory=list)
    pip_requirements: list[Any] | None = None
    npm_requirements: list[Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class MessageHit:
    """A recall search result: the message and its rank (higher is better)."""

    message: Message
    agent_id: str
    run_id: str | None
    score: float


IDENTITY_TYPES = ("org", "user", "other")  # Letta's IdentityType
PROPERTY_TYPES = ("string", "number", "boolean", "json")  # Letta's IdentityPropertyType


@dataclass(slots=True)
class IdentityRecord:
    """Who an agent or block belongs to (an end user, an org): Letta's Identity.

    ``properties`` are Letta's typed pairs, ``{"key", "value", "type"}``; ``agent_ids`` and
    ``block_ids`` are read back from the link tables (oldest link first)."""

    identifier_key: str
    name: str
    identity_type: str = "user"
    id: str = field(default_factory=lambda: new_record_id("identity"))
    project_id: str | None = None
    properties: list[dict[str, Any]] = field(default_factory=list)
    agent_ids: list[str] = field(default_factory=list)
    block_ids: list[str] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class GroupRecord:
    """A group as stored; ``agent_ids`` in turn order."""

    manager_type: str
    agent_ids: list[str]
    description: str = ""
    id: str = field(default_factory=lambda: new_id("group"))
    manager_agent_id: str | None = None
    max_turns: int | None = None
    termination_token: str | None = None
    sleeptime_agent_frequency: int | None = None
    turns_counter: int | None = None
    last_processed_message_id: str | None = None
    hidden: bool | None = None
    project_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    cursors: dict[str, int] = field(default_factory=dict)
    shared_block_ids: list[str] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class GroupMessage:
    """One message of a group's conversation: the user's input or a member's reply."""

    role: str  # "user" or "assistant"
    text: str
    sender_id: str | None = None  # the member that said it; None for the user
    name: str | None = None
    run_id: str | None = None
    id: str = field(default_factory=lambda: new_id("message"))
    created_at: float = field(default_factory=time.time)
    seq: int = 0


@dataclass(slots=True)
class ConversationRecord:
    """One conversation as stored (``in_context_message_ids`` complete, as read)."""

    agent_id: str
    id: str = field(default_factory=lambda: new_record_id("conv"))
    summary: str | None = None
    in_context_message_ids: list[str] = field(default_factory=list)
    pending_approval: dict[str, Any] | None = None
    isolated_block_ids: list[str] = field(default_factory=list)
    model: str | None = None
    model_settings: dict[str, Any] | None = None
    last_message_at: float | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class ProviderTraceRecord:
    """What a step sent its model and what came back (Letta's ``ProviderTrace``)."""

    step_id: str
    agent_id: str
    run_id: str | None
    request_json: dict[str, Any]
    response_json: dict[str, Any]
    call_type: str = "agent_step"
    id: str = field(default_factory=lambda: new_record_id("provider_trace"))
    created_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class ScheduleRecord:
    """A message sent to an agent at a time (``schedule["scheduled_at"]``, Unix ms) or on a
    cron schedule (``schedule["cron_expression"]``); ``next_at`` is when it is next due, in
    seconds, None once a one-time message has fired."""

    agent_id: str
    request: dict[str, Any]
    schedule: dict[str, Any]
    next_at: float | None
    fired_count: int = 0
    last_fired_at: float | None = None
    last_run_id: str | None = None
    id: str = field(default_factory=lambda: new_record_id("scheduled_message"))
    created_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class BatchRequestRecord:
    """One request of a message batch: an agent's input (a ``LettaRequest`` as JSON) and what
    became of it: ``pending``, ``running``, ``completed``, ``failed`` or ``cancelled``, with
    the run it started, that run's stop reason and error."""

    agent_id: str
    request: dict[str, Any]
    batch_id: str = ""
    position: int = 0
    status: str = "pending"
    run_id: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    started_at: float | None = None
    completed_at: float | None = None
    id: str = field(default_factory=lambda: new_record_id("batch_item"))


@dataclass(slots=True)
class BatchRecord:
    """A message batch: ``running`` until each of its requests has ended (``completed``)
    or it is ``cancelled``; ``callback`` records the call of its ``callback_url``."""

    requests: list[BatchRequestRecord]
    status: str = "running"
    callback_url: str | None = None
    callback: dict[str, Any] | None = None
    id: str = field(default_factory=lambda: new_record_id("job"))
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    completed_at: float | None = None
