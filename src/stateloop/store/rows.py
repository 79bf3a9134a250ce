"""Records <-> table rows. Pure functions, so the SQL code reads as queries only."""

from __future__ import annotations

import json
from typing import Any

import orjson

from stateloop.messages import Message, Usage
from stateloop.store.records import (
    AgentRecord,
    BlockRecord,
    PassageRecord,
    RunRecord,
    StepRecord,
    ToolRecord,
)
from stateloop.surrogates import replace_lone_surrogates_in


def to_json(value: Any) -> str:
    """JSON text for a column; orjson is several times faster than json on the step path."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # keys that are not strings, integers over 64 bits
        return _to_json_slowly(value)


def _to_json_slowly(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value)


USAGE_COLUMNS = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens",
                 "cache_write_tokens")


def usage_list(usage: Usage) -> list[int]:
    """The counts in ``USAGE_COLUMNS`` order."""
    return [usage.input_tokens, usage.output_tokens, usage.cached_input_tokens,
            usage.reasoning_tokens, usage.cache_write_tokens]


def usage_from_row(row: Any) -> Usage:
    return Usage(**{name: getattr(row, name) for name in USAGE_COLUMNS})


AGENT_FIELDS = ("id", "name", "agent_type", "description", "system", "model", "llm_config",
                "embedding_config", "tool_rules", "tool_names", "metadata",
                "in_context_message_ids", "message_buffer_autoclear", "enable_sleeptime",
                "timezone", "extra", "created_at", "updated_at", "last_run_completion",
                "last_run_duration_ms", "last_stop_reason", "pending_approval")


def agent_values(agent: AgentRecord) -> dict[str, Any]:
    return {name: getattr(agent, name) for name in AGENT_FIELDS}


def agent_from_row(row: Any, tags: list[str]) -> AgentRecord:
    values = {name: getattr(row, name) for name in AGENT_FIELDS}
    return AgentRecord(tags=tags, **values)


BLOCK_FIELDS = ("id", "label", "value", "limit", "description", "read_only", "hidden",
                "preserve_on_migration", "metadata", "extra", "created_at", "updated_at")


def block_values(block: BlockRecord) -> dict[str, Any]:
    return {name: getattr(block, name) for name in BLOCK_FIELDS}


def block_from_row(row: Any) -> BlockRecord:
    return BlockRecord(**{name: row._mapping[name] for name in BLOCK_FIELDS})


def search_texts(message: Message) -> tuple[str, str | None]:
    """What recall indexes: (visible text, tool noise). Tool noise is a tool result's text,
    or a tool call's name and string arguments; searched only with ``include_tool``."""
    if message.role == "tool":
        return "", message.text
    if not message.tool_calls:
        return message.text, None
    pieces = []
    for call in message.tool_calls:
        pieces.append(call.name)
        for value in call.arguments.values():
            if type(value) is str:
                pieces.append(value)
    return message.text, "\n".join(pieces)


MESSAGE_COLUMNS = ("id", "agent_id", "run_id", "step_id", "role", "created_at", "token_count",
                   "text", "tool_text", "data", "step", "step_at")


def message_row(agent_id: str, message: Message, run_id: str | None, step_id: str | None,
                step: StepRecord | None = None) -> tuple[Any, ...]:
    """A messages row in ``MESSAGE_COLUMNS`` order, JSON already encoded: ``data`` is the
    message's body (revision 0007; rows stored before also repeat the columns in it); on
    the step's last row, ``step`` the step record (``step_json``) and ``step_at`` its time,
    the order steps are listed in. Lone surrogates, which neither JSON nor the database
    takes, are stored as U+FFFD."""
    text, tool_text = search_texts(message)
    body = message.body()
    try:
        data = orjson.dumps(body).decode()  # refuses lone surrogates: then none are anywhere
    except TypeError:
        body = replace_lone_surrogates_in(body)
        text, tool_text = replace_lone_surrogates_in([text, tool_text])
        data = to_json(body)
    return (message.id, agent_id, run_id, step_id, message.role, message.created_at,
            message.token_count, text, tool_text, data,
            None if step is None else step_json(step), None if step is None else step.created_at)


def message_from_row(row: Any) -> Message:
    """A message from a row with ``MESSAGE_READ``'s columns."""
    return Message.from_dict({**row.data, "id": row.id, "role": row.role,
                              "created_at": row.created_at, "token_count": row.token_count})


def run_values(run: RunRecord) -> dict[str, Any]:
    return {"id": run.id, "agent_id": run.agent_id, "status": run.status,
            "stop_reason": run.stop_reason, "error": run.error, **run.usage.to_dict(),
            "step_count": run.step_count, "metadata": run.metadata,
            "created_at": run.created_at, "started_at": run.started_at,
            "completed_at": run.completed_at}


def run_from_row(row: Any) -> RunRecord:
    return RunRecord(agent_id=row.agent_id, id=row.id, status=row.status,
                     stop_reason=row.stop_reason, error=row.error, usage=usage_from_row(row),
                     step_count=row.step_count, metadata=row.metadata,
                     created_at=row.created_at, started_at=row.started_at,
                     completed_at=row.completed_at, first_seq=row.first_seq)


STEP_COLUMNS = ("id", "run_id", "agent_id", "step_index", "model", "provider", *USAGE_COLUMNS,
                "latency_ms", "finish_reason", "error", "metadata", "created_at")


def step_row(step: StepRecord) -> tuple[Any, ...]:
    """A steps row in ``STEP_COLUMNS`` order, JSON already encoded."""
    return (step.id, step.run_id, step.agent_id, step.index, step.model, step.provider,
            *usage_list(step.usage), step.latency_ms, step.finish_reason, step.error,
            to_json(step.metadata), step.created_at)


# A step record on its step's last message row: a JSON array of these fields in this order
# (revision 0007). The row holds the step's id (``step_id``), run and agent.
STEP_RECORD_FIELDS = ("index", "model", "provider", *USAGE_COLUMNS, "latency_ms",
                      "finish_reason", "error", "metadata", "created_at")


def step_json(step: StepRecord) -> str:
    """A step record as its message row carries it (``STEP_RECORD_FIELDS``)."""
    return to_json([step.index, step.model, step.provider, *usage_list(step.usage),
                    step.latency_ms, step.finish_reason, step.error, step.metadata,
                    step.created_at])


def step_from_json(data: list[Any], step_id: str, run_id: str | None,
                   agent_id: str) -> StepRecord:
    (index, model, provider, input_tokens, output_tokens, cached_input_tokens,
     reasoning_tokens, cache_write_tokens, latency_ms, finish_reason, error, metadata,
     created_at) = data
    return StepRecord(run_id=run_id, agent_id=agent_id, id=step_id, index=index, model=model,
                      provider=provider,
                      usage=Usage(input_tokens, output_tokens, cached_input_tokens,
                                  reasoning_tokens, cache_write_tokens),
                      latency_ms=latency_ms, finish_reason=finish_reason, error=error,
                      metadata=metadata, created_at=created_at)


def step_from_row(row: Any) -> StepRecord:
    return StepRecord(run_id=row.run_id, agent_id=row.agent_id, id=row.id,
                      index=row.step_index, model=row.model, provider=row.provider,
                      usage=usage_from_row(row), latency_ms=row.latency_ms,
                      finish_reason=row.finish_reason, error=row.error,
                      metadata=row.metadata, created_at=row.created_at)


def passage_from_row(row: Any, decode: Any) -> PassageRecord:
    embedding = decode(row.embedding) if row.embedding is not None else None
    return PassageRecord(archive_id=row.archive_id, text=row.text, embedding=embedding,
                         embedding_model=row.embedding_model, embedding_dim=row.embedding_dim,
                         tags=list(row.tags), metadata=row.metadata, id=row.id,
                         created_at=row.created_at, seq=row.seq)


TOOL_FIELDS = ("id", "name", "description", "tool_type", "source_type", "source_code",
               "binding", "json_schema", "args_json_schema", "return_char_limit",
               "default_requires_approval", "enable_parallel_execution", "tags",
               "pip_requirements", "npm_requirements", "metadata", "created_at", "updated_at")


def tool_values(tool: ToolRecord) -> dict[str, Any]:
    return {name: getattr(tool, name) for name in TOOL_FIELDS}


def tool_from_row(row: Any) -> ToolRecord:
    return ToolRecord(**{name: getattr(row, name) for name in TOOL_FIELDS})
