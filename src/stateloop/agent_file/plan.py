"""An Agent File turned into what the store will hold — agents, blocks, messages, tools —
with every id remapped and every field checked before anything is written.

What the file says maps to stateloop's own fields: Letta's agent types, tool rules (by
their type names), the model (``llm_config.handle``; a model stateloop cannot call is kept
and reported), the context window and output limit, the embedding settings, the tool
environment (``secrets``). Fields stateloop has no use for are kept in the agent record's
``extra`` so an export writes them back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from ..agent_options import parse_rules
from ..agent_types import AGENT_TYPES
from ..errors import ConfigError
from ..llm.providers import UnconfiguredModel
from ..llm.registry import resolve_model
from ..llm.tokens import message_tokens
from ..memory.blocks import Block
from ..messages import Message
from ..storable import check_value, count
from ..store.records import (
    DEFAULT_BLOCK_LIMIT,
    AgentRecord,
    BlockRecord,
    GroupRecord,
    ToolRecord,
    new_record_id,
)
from .groups import read_groups
from .history import arrange
from .letta_messages import from_letta
from .memory_history import HISTORY_KEY, History, read_histories
from .reading import AgentFileError, LeftOut, refuse
from .skills import Skill, letta_label, read_skills
from .tools import read_tools

ENV_KEY = "tool_env"  # where an agent's tool variables live in ``extra`` (as the server's)
LLM_KEY = "letta_llm_config"  # the file's llm_config, written back on export
AGENT_KEY = "agent_file"  # the file's other agent fields stateloop keeps but does not use
_KEPT_FIELDS = ("max_files_open", "per_file_view_window_char_limit")
_BLOCK_EXTRA = ("template_name", "is_template", "template_id", "base_template_id",
                "deployment_id", "entity_id", "project_id")


@dataclass(slots=True)
class ImportOptions:
    """How an import treats the file. ``name`` renames every agent; ``append_copy_suffix``
    adds ``_copy`` (Letta's REST default); ``secrets`` fill the file's tool variables;
    ``model``/``embedding`` replace the file's. What stateloop cannot take (a tool whose
    source does not compile, a block or tool rule it cannot read, a reference to either) is
    left out and named in the notes; ``strict`` refuses the file instead."""

    name: str | None = None
    append_copy_suffix: bool = False
    override_existing_tools: bool = True
    strip_messages: bool = False
    secrets: dict[str, str] | None = None
    model: str | None = None
    embedding: str | None = None
    strict: bool = False
    project_id: str | None = None
    model_options: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PlannedAgent:
    record: AgentRecord
    blocks: list[BlockRecord]  # created with this agent
    shared: list[str]  # blocks created with an earlier agent of the file, attached
    messages: list[Message]
    shared_labels: set[str] = field(default_factory=set)  # the labels of ``shared``
    history: History | None = None  # its memory history, when the file carries it


@dataclass(slots=True)
class ImportPlan:
    agents: list[PlannedAgent]
    tools: list[ToolRecord]
    groups: list[GroupRecord]
    notes: list[str]  # what was left out, changed or repaired, for the caller to show
    skipped_tools: list[str]


def plan_import(data: dict[str, Any], options: ImportOptions) -> ImportPlan:
    """Everything the import will write, or an ``AgentFileError`` naming the field."""
    refuse(check_value({"name": options.name, "model": options.model,
                        "embedding": options.embedding, "secrets": options.secrets,
                        "project_id": options.project_id}))  # what replaces the file's
    left_out = LeftOut(strict=options.strict)
    tools = read_tools(data.get("tools") or [], left_out)
    notes = left_out.notes
    blocks = _blocks(data.get("blocks") or [], left_out)
    created: set[str] = set()
    in_file = {e.get("id") for kind in ("tools", "blocks") for e in data.get(kind) or []}
    agents = [_agent(entry, f"agents.{index}", options, tools.names, blocks, created,
                     left_out, in_file)
              for index, entry in enumerate(data["agents"])]
    by_file_id = {entry.get("id"): planned.record
                  for entry, planned in zip(data["agents"], agents, strict=True)}
    groups = read_groups(data.get("groups") or [], by_file_id,
                         {file_id: block.id for file_id, block in blocks.items()}, left_out)
    for entry, planned in zip(data["agents"], agents, strict=True):
        if entry.get("enable_sleeptime") and not planned.record.enable_sleeptime:
            notes.append(f"agent {planned.record.name!r}: its sleep-time memory agent is not "
                         "in the file; turn it on again once imported")
    _give_skills(agents, read_skills(data.get("skills") or [], left_out), notes)
    if data.get(HISTORY_KEY) is not None:
        histories = read_histories(data[HISTORY_KEY], set(by_file_id))
        for entry, planned in zip(data["agents"], agents, strict=True):
            planned.history = histories.get(entry.get("id"))
    for kind in ("files", "sources", "mcp_servers"):
        if data.get(kind):
            left_out.skip(f"{len(data[kind])} {kind.replace('_', ' ')}", AgentFileError(
                f"stateloop does not import {kind.replace('_', ' ')} yet"))
    return ImportPlan(agents, tools.records, groups, notes, tools.skipped)


def _give_skills(agents: list[PlannedAgent], skills: list[Skill], notes: list[str]) -> None:
    """Each agent of the file gets the file's skills as blocks ``skills/NAME``; one it has
    a block of that label for keeps its own."""
    for planned in agents:
        labels = {b.label for b in planned.blocks} | planned.shared_labels
        for skill in skills:
            label = f"skills/{skill.name}"
            if label in labels:
                notes.append(f"agent {planned.record.name!r}: its own block {label!r} is kept "
                             f"over the file's skill {skill.name!r}")
                continue
            planned.blocks.append(BlockRecord(label, skill.instructions, DEFAULT_BLOCK_LIMIT,
                                              new_record_id("block"), skill.description))


def _blocks(entries: list[dict[str, Any]], left_out: LeftOut) -> dict[str, BlockRecord]:
    found = {}
    for index, entry in enumerate(entries):
        where = f"blocks.{index}"
        file_id = entry.get("id")
        try:
            if not isinstance(file_id, str):
                raise AgentFileError("a block has an id", field=f"{where}.id")
            found[file_id] = _block(entry, where, left_out.notes)
        except AgentFileError as exc:
            label = entry.get("label")
            left_out.skip(f"block {label!r}" if isinstance(label, str) else where, exc)
    return found


def _block(entry: dict[str, Any], where: str, notes: list[str]) -> BlockRecord:
    """The block; a value longer than its limit (Letta exports such blocks) is kept whole
    and the limit raised to fit, with a note saying so."""
    label, value = entry.get("label"), entry.get("value", "")
    limit = entry.get("limit") or DEFAULT_BLOCK_LIMIT
    description = entry.get("description")
    if not isinstance(label, str):
        raise AgentFileError("a block has a label", field=f"{where}.label")
    label = letta_label(label)
    if not isinstance(value, str) or not isinstance(limit, int) or isinstance(limit, bool) \
            or not isinstance(description, str | None):
        raise AgentFileError("value and description are strings, limit an integer",
                             field=where)
    if len(value) > limit > 0:
        notes.append(f"block {label!r}: its value has {len(value)} characters, over its "
                     f"limit of {limit}; the value is kept and the limit raised to "
                     f"{len(value)}")
        limit = len(value)
    try:
        Block(label, value, description, limit, bool(entry.get("read_only")))
    except ValueError as exc:
        raise AgentFileError(str(exc), field=where) from None
    metadata = entry.get("metadata") or {}
    return BlockRecord(label, value, limit, new_record_id("block"), description,
                       bool(entry.get("read_only")), entry.get("hidden"),
                       bool(entry.get("preserve_on_migration")),
                       metadata if isinstance(metadata, dict) else {},
                       {k: entry[k] for k in _BLOCK_EXTRA if entry.get(k) is not None})


def _agent(entry: dict[str, Any], where: str, options: ImportOptions,
           tool_names: dict[str, str], blocks: dict[str, BlockRecord], created: set[str],
           left_out: LeftOut, in_file: set[Any]) -> PlannedAgent:
    notes = left_out.notes
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise AgentFileError("an agent has a name", field=f"{where}.name")
    name = options.name or (f"{name}_copy" if options.append_copy_suffix else name)
    agent_type = entry.get("agent_type") or "letta_v1_agent"
    if agent_type not in AGENT_TYPES:
        notes.append(f"agent {name!r}: agent type {agent_type!r} is not one stateloop has; "
                     "imported as letta_v1_agent")
        agent_type = "letta_v1_agent"
    config = _dict(entry.get("llm_config"), f"{where}.llm_config")
    model = options.model or _text(entry.get("model"), f"{where}.model") or _text(
        config.get("handle"), f"{where}.llm_config.handle") or (
        f"{config.get('model_endpoint_type') or 'openai'}/"
        f"{_text(config['model'], f'{where}.llm_config.model')}"
        if config.get("model") else None)
    if not model:
        raise AgentFileError("an agent names its model (llm_config.model or model)",
                             field=f"{where}.llm_config")
    provider, _, rest = str(model).partition("/")
    if rest and provider.lower() in ("openai", "anthropic"):
        model = f"{provider.lower()}/{rest}"  # Letta wrote "OpenAI/gpt-4.1" at times
    window = _count(entry, "context_window_limit", where) or _count(config, "context_window",
                                                                    f"{where}.llm_config")
    max_tokens = _count(entry, "max_tokens", where) or _count(config, "max_tokens",
                                                              f"{where}.llm_config")
    try:
        resolved = resolve_model(model, context_window=window or 8192, **options.model_options)
    except ConfigError as exc:
        notes.append(f"agent {name!r}: model {model!r} kept, but stateloop cannot call it "
                      f"as it is ({exc}); change it before running the agent")
    else:
        if isinstance(resolved, UnconfiguredModel):
            notes.append(f"agent {name!r}: model {model!r} kept, but its provider is not "
                         f"configured here: {resolved.problem} before running the agent")
    rules = []
    for index, rule in enumerate(_list(entry.get("tool_rules"), f"{where}.tool_rules")):
        try:
            rules += [r.model_dump(mode="json") for r in parse_rules([rule])]
        except (ConfigError, ValueError, TypeError) as exc:
            kind = rule.get("type") if isinstance(rule, dict) else None
            left_out.skip(f"agent {name!r}: tool rule {index} ({kind})", AgentFileError(
                str(exc), field=f"{where}.tool_rules.{index}"))
    names = []
    for index, tool_id in enumerate(_list(entry.get("tool_ids"), f"{where}.tool_ids")):
        if tool_id in tool_names:
            names.append(tool_names[tool_id])
        elif tool_id not in in_file:
            left_out.skip(f"agent {name!r}: tool {tool_id!r}", AgentFileError(
                "the file does not hold it",
                field=f"{where}.tool_ids.{index}"))
        # else: a tool of the file left out, named already
    names += [n for n in _list(entry.get("tools"), f"{where}.tools") if isinstance(n, str)]
    own, shared = _agent_blocks(entry, where, name, blocks, created, left_out, in_file)
    by_id = {block.id: block.label for block in blocks.values()}
    record = AgentRecord(
        name=name, agent_type=agent_type,
        description=_optional_text(entry.get("description"), f"{where}.description"),
        system=_text(entry.get("system"), f"{where}.system"), model=model,
        llm_config={"model": model, "context_window": window,
                    "context_window_override": window,
                    "max_tokens": max_tokens,
                    "parallel_tool_calls": bool(config.get("parallel_tool_calls", True)
                                                if entry.get("parallel_tool_calls") is None
                                                else entry["parallel_tool_calls"])},
        embedding_config=_embedding(entry, options),
        tool_rules=rules, tool_names=list(dict.fromkeys(names)),
        tags=[t for t in _list(entry.get("tags"), f"{where}.tags") if isinstance(t, str)],
        metadata=_dict(entry.get("metadata"), f"{where}.metadata"),
        message_buffer_autoclear=bool(entry.get("message_buffer_autoclear")),
        timezone=_text(entry.get("timezone"), f"{where}.timezone") or "UTC")
    record.extra = {LLM_KEY: config, AGENT_KEY: {k: entry[k] for k in _KEPT_FIELDS
                                                 if k in entry}}
    variables = _env(entry, options.secrets)
    if variables:
        record.extra[ENV_KEY] = [{"id": f"agent-env-{uuid.uuid4()}", "key": k, "value": v}
                                 for k, v in variables.items()]
    if entry.get("response_format") is not None:
        record.extra["response_format"] = entry["response_format"]
    messages, pending = _messages(entry, where, record, options, notes)
    record.in_context_message_ids = pending[0]
    record.pending_approval = pending[1]
    return PlannedAgent(record, own, shared, messages, {by_id[i] for i in shared})


def _agent_blocks(entry: dict[str, Any], where: str, name: str,
                  blocks: dict[str, BlockRecord], created: set[str], left_out: LeftOut,
                  in_file: set[Any]) -> tuple[list[BlockRecord], list[str]]:
    own: list[BlockRecord] = []
    shared: list[str] = []
    labels: set[str] = set()

    def add(record: BlockRecord, where: str) -> bool:
        if record.label in labels:
            left_out.skip(f"agent {name!r}: a second block {record.label!r}", AgentFileError(
                "an agent has one block of each label", field=where))
            return False
        labels.add(record.label)
        return True

    for index, block_id in enumerate(_list(entry.get("block_ids"), f"{where}.block_ids")):
        record = blocks.get(block_id) if isinstance(block_id, str) else None
        here = f"{where}.block_ids.{index}"
        if record is None:
            if block_id not in in_file:  # else a block of the file left out, named already
                left_out.skip(f"agent {name!r}: block {block_id!r}", AgentFileError(
                    "the file does not hold it", field=here))
        elif not add(record, here):
            continue
        elif record.id in created:
            shared.append(record.id)  # shared between agents of the file: stays shared
        else:
            created.add(record.id)
            own.append(record)
    for index, inline in enumerate(_list(entry.get("memory_blocks"), f"{where}.memory_blocks")):
        here = f"{where}.memory_blocks.{index}"
        try:
            if not isinstance(inline, dict):
                raise AgentFileError("must be an object", field=here)
            record = _block(inline, here, left_out.notes)
        except AgentFileError as exc:
            left_out.skip(f"agent {name!r}: memory block {index}", exc)
            continue
        if add(record, here):
            own.append(record)
    return own, shared


def _messages(entry: dict[str, Any], where: str, record: AgentRecord, options: ImportOptions,
              notes: list[str]) -> tuple[list[Message], tuple[list[str], Any]]:
    by_file_id: dict[str, list[Message]] = {}
    ordered: list[Message] = []
    approval_ids: set[str] = set()
    for index, item in enumerate(_list(entry.get("messages"), f"{where}.messages")):
        here = f"{where}.messages.{index}"
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise AgentFileError("a message is an object with an id", field=here)
        converted = from_letta(item, here)
        for message in converted.messages:
            message_tokens(message, record.model)
        ordered.extend(converted.messages)
        by_file_id[item["id"]] = converted.messages  # several: parallel returns in one
        if converted.approval_request:
            approval_ids.add(converted.messages[0].id)
    context: list[Message] = []
    for index, file_id in enumerate(_list(entry.get("in_context_message_ids"),
                                          f"{where}.in_context_message_ids")):
        if file_id not in by_file_id:
            raise AgentFileError(f"names message {file_id!r}, which the agent does not hold",
                                 field=f"{where}.in_context_message_ids.{index}")
        context += by_file_id[file_id]
    if options.strip_messages:
        ordered = context = [m for m in context[:1] if m.role == "system"]
    wait_for = {r["tool_name"] for r in record.tool_rules if r.get("type") == "requires_approval"}
    history = arrange(ordered, context, approval_ids, wait_for)
    notes += [f"agent {record.name!r}: {note}" for note in history.notes]
    pending = history.pending.to_dict() if history.pending else None
    return history.stored, (history.in_context, pending)


def _embedding(entry: dict[str, Any], options: ImportOptions) -> dict[str, Any]:
    config = _dict(entry.get("embedding_config"), "embedding_config")
    if options.embedding:
        provider, _, model = options.embedding.partition("/")
        return {**config, "handle": options.embedding, "embedding_model": model or provider,
                "embedding_endpoint_type": provider if model else config.get(
                    "embedding_endpoint_type", "openai")}
    return config


def _env(entry: dict[str, Any], secrets: dict[str, str] | None) -> dict[str, str]:
    variables = entry.get("secrets") or entry.get("tool_exec_environment_variables") or {}
    if isinstance(variables, list):  # older files: [{"key", "value"}]
        variables = {v.get("key"): v.get("value") for v in variables if isinstance(v, dict)}
    if not isinstance(variables, dict):
        raise AgentFileError("must be an object", field="secrets")
    if secrets:  # as Letta: the caller's values replace the file's, key by key
        return {str(k): str(secrets.get(k, "")) for k in variables}
    return {str(k): "" if v is None else str(v) for k, v in variables.items()}


def _count(entry: dict[str, Any], key: str, where: str) -> int | None:
    """A context window or output limit, read as the JSON create route reads it."""
    try:
        return count(entry.get(key) or None, key)
    except ValueError as exc:
        raise AgentFileError(str(exc), field=f"{where}.{key}") from None


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AgentFileError(f"must be a list, not {type(value).__name__}", field=where)
    return value


def _dict(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AgentFileError(f"must be an object, not {type(value).__name__}", field=where)
    return value


def _optional_text(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise AgentFileError(f"must be a string, not {type(value).__name__}", field=where)
    return value
