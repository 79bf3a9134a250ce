"""Letta's request bodies, as pydantic models with the spec's field names (only the fields
clients use; others are ignored unless Letta's schema forbids them)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag

from ...storable import INT_MAX, Count
from ...store.memory_files import label_problem
from .content import ImageContent

# The store keeps counts and limits in 64-bit integer columns: a larger one is refused (422,
# naming the field) rather than failing in the database.
INT64_MAX = INT_MAX


class ErrorBody(BaseModel):
    """An error other than a 422: ``{"detail": "what is wrong, naming the id or field"}``."""

    detail: str


_MEANINGS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
             409: "Conflict", 502: "Bad Gateway", 503: "Service Unavailable",
             413: "Content Too Large", 415: "Unsupported Media Type"}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route that answers these statuses (422 FastAPI declares itself),
    so the OpenAPI document lists every status the route really returns."""
    return {status: {"model": ErrorBody, "description": _MEANINGS[status]}
            for status in statuses}


def streamed(*statuses: int, model: type[BaseModel] | None = None
             ) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route that answers with Server-Sent Events (or, given ``model``,
    with that JSON body when the request does not ask for a stream)."""
    ok: dict[str, Any] = {"content": {"text/event-stream": {"schema": _SSE_EVENT}}}
    if model is not None:
        ok["model"] = model
    return {200: ok, **errors(*statuses)}


# One event of the stream (OpenAPI 3.1: a sequential media type's schema describes an item);
# ``data`` is a JSON message frame, or ``[DONE]`` at the end.
_SSE_EVENT = {"type": "object", "required": ["data"],
              "properties": {"data": {"type": "string"}, "event": {"type": "string"},
                             "id": {"type": "string"}}}


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_env(variables: dict[str, str] | None) -> dict[str, str] | None:
    for key, value in (variables or {}).items():
        if not _ENV_NAME.fullmatch(key):
            raise ValueError(f"{key!r} is not an environment variable name (letters, digits "
                             f"and '_', not starting with a digit)")
        if "\0" in value:
            raise ValueError(f"the value of {key!r} contains a NUL character")
    return variables


# Letta's per-agent tool environment: {"NAME": "value"}.
ToolEnv = Annotated[dict[str, str] | None, AfterValidator(_check_env)]


class Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")  # the spec says additionalProperties: false


def _block_label(label: str | None) -> str | None:
    """A label the agent can hold (a path such as ``system/persona``: memory.blocks.Block's
    rule), else 422 naming it."""
    problem = None if label is None else label_problem(label)
    if problem is not None:
        raise ValueError(problem)
    return label


BlockLabel = Annotated[str, AfterValidator(_block_label), Field(min_length=1)]


class CreateBlock(Lenient):
    label: BlockLabel
    value: str
    limit: Count | None = None
    description: str | None = None
    read_only: bool = False
    metadata: dict[str, Any] | None = None
    hidden: bool | None = None
    preserve_on_migration: bool | None = None


class BlockUpdate(Lenient):
    value: str | None = None
    label: BlockLabel | None = None
    limit: Count | None = None
    description: str | None = None
    read_only: bool | None = None
    metadata: dict[str, Any] | None = None
    hidden: bool | None = None


class LLMConfig(Lenient):
    model: str
    model_endpoint_type: str = "openai"
    model_endpoint: str | None = None
    context_window: Count | None = None
    max_tokens: Count | None = None
    handle: str | None = None
    parallel_tool_calls: bool | None = None


class CreateAgent(Lenient):
    name: str | None = Field(default=None, min_length=1)
    agent_type: str = "letta_v1_agent"
    system: str | None = None
    description: str | None = None
    model: str | None = None
    llm_config: LLMConfig | None = None
    context_window_limit: Count | None = None
    max_tokens: Count | None = None
    parallel_tool_calls: bool | None = None
    memory_blocks: list[CreateBlock] | None = None
    block_ids: list[str] | None = None
    identity_ids: list[str] | None = None
    tools: list[str] | None = None
    tool_ids: list[str] | None = None
    tool_rules: list[dict[str, Any]] | None = None
    include_base_tools: bool = True
    include_multi_agent_tools: bool = False
    initial_message_sequence: list[MessageCreate] | None = None
    embedding: str | None = None
    embedding_config: dict[str, Any] | None = None
    embedding_chunk_size: int | None = Field(default=None, ge=1)
    model_settings: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    message_buffer_autoclear: bool = False
    timezone: str | None = None
    secrets: ToolEnv = None
    tool_exec_environment_variables: ToolEnv = None  # Letta's deprecated name for secrets
    enable_sleeptime: bool | None = None  # a memory agent edits memory in the background


class UpdateAgent(Lenient):
    name: str | None = Field(default=None, min_length=1)
    system: str | None = None
    description: str | None = None
    model: str | None = None
    llm_config: LLMConfig | None = None
    context_window_limit: Count | None = None
    embedding: str | None = None
    model_settings: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    tool_ids: list[str] | None = None
    tool_rules: list[dict[str, Any]] | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    block_ids: list[str] | None = None
    identity_ids: list[str] | None = None
    secrets: ToolEnv = None
    tool_exec_environment_variables: ToolEnv = None  # Letta's deprecated name for secrets
    enable_sleeptime: bool | None = None  # a memory agent edits memory in the background


class TextContent(Lenient):
    type: Literal["text"] = "text"
    text: str


class MessageCreate(Lenient):
    type: Literal["message"] | None = "message"
    role: Literal["user", "system", "assistant"]
    content: str | list[TextContent | ImageContent]
    name: str | None = None
    otid: str | None = None
    sender_id: str | None = None

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if isinstance(part, TextContent))


class ApprovalReturn(Lenient):
    type: Literal["approval"] = "approval"
    tool_call_id: str
    approve: bool
    reason: str | None = None


class ToolReturn(Lenient):
    type: Literal["tool"] = "tool"
    tool_call_id: str
    status: Literal["success", "error"]
    tool_return: str | list[TextContent | ImageContent]
    stdout: list[str] | None = None
    stderr: list[str] | None = None

    @property
    def text(self) -> str:
        """The result as the model reads it, as Letta gives it to a chat model: the text
        parts a line each, then a placeholder for the images ("[Image omitted]")."""
        if isinstance(self.tool_return, str):
            return self.tool_return
        text = "\n".join(p.text for p in self.tool_return if isinstance(p, TextContent) and p.text)
        images = sum(isinstance(p, ImageContent) for p in self.tool_return)
        if images:
            omitted = "[Image omitted]" if images == 1 else f"[{images} images omitted]"
            text = f"{text} {omitted}" if text else omitted
        return text


def _kind(default: str) -> Any:
    """A discriminator on ``type`` that treats a missing type as ``default``."""

    def pick(value: Any) -> str:
        found = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        return found or default

    return Discriminator(pick)


Decision = Annotated[
    Annotated[ApprovalReturn, Tag("approval")] | Annotated[ToolReturn, Tag("tool")],
    _kind("approval")]


class ApprovalCreate(Lenient):
    type: Literal["approval"] = "approval"
    approvals: list[Decision] | None = None
    # The older single-decision form.
    approve: bool | None = None
    approval_request_id: str | None = None
    reason: str | None = None


class ToolReturnCreate(Lenient):
    type: Literal["tool_return"] = "tool_return"
    tool_returns: list[ToolReturn]


InputMessage = Annotated[
    Annotated[MessageCreate, Tag("message")] | Annotated[ApprovalCreate, Tag("approval")]
    | Annotated[ToolReturnCreate, Tag("tool_return")],
    _kind("message")]


class ClientToolSchema(Lenient):
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ClientSkillSchema(Lenient):
    """A skill the client holds, listed in the request's prompt beside the agent's own."""

    name: str = Field(min_length=1, max_length=256)
    description: str = Field(max_length=4096)
    location: str = Field(max_length=4096)


class LettaRequest(Lenient):
    messages: list[InputMessage] | None = None
    input: str | list[TextContent | ImageContent] | None = None
    max_steps: Count | None = None
    override_model: str | None = None  # a handle such as "openai/gpt-4o", for this run only
    use_assistant_message: bool = True
    include_return_message_types: list[str] | None = None
    enable_thinking: str | None = None
    client_tools: list[ClientToolSchema] | None = None
    client_skills: list[ClientSkillSchema] | None = Field(default=None, max_length=1000)


class LettaStreamingRequest(LettaRequest):
    streaming: bool = False
    stream_tokens: bool = False
    include_pings: bool = True
    background: bool = False


class LettaAsyncRequest(LettaRequest):
    callback_url: str | None = None


class CancelAgentRunRequest(Lenient):
    run_ids: list[str] | None = None


class RetrieveStreamRequest(Lenient):
    starting_after: int = 0
    include_pings: bool = True
    poll_interval: float | None = None
    batch_size: int | None = None


class SteerRequest(Strict):
    """stateloop's extension: input for the run in flight."""

    content: str = Field(min_length=1)
    mode: Literal["after_batch", "interrupt", "follow_up"] = "after_batch"


class ToolCreate(Strict):
    source_code: str
    description: str | None = None
    tags: list[str] | None = None
    source_type: str | None = "python"
    json_schema: dict[str, Any] | None = None
    args_json_schema: dict[str, Any] | None = None
    return_char_limit: int | None = Field(default=None, ge=1, le=1_000_000)
    pip_requirements: list[Any] | None = None
    npm_requirements: list[Any] | None = None
    default_requires_approval: bool | None = None
    enable_parallel_execution: bool | None = None


class ToolUpdate(Lenient):
    source_code: str | None = None
    description: str | None = None
    tags: list[str] | None = None
    json_schema: dict[str, Any] | None = None
    args_json_schema: dict[str, Any] | None = None
    default_requires_approval: bool | None = None
    return_char_limit: int | None = Field(default=None, ge=1, le=1_000_000)


class ModifyApprovalRequest(Strict):
    requires_approval: bool


class CreateArchivalMemory(Lenient):
    text: str = Field(min_length=1)
    tags: list[str] | None = None
    created_at: str | None = None


# --- identities (routes/identities.py) ---

IdentityType = Literal["org", "user", "other"]


class IdentityProperty(Strict):
    key: str
    value: str | int | float | bool | dict[str, Any]
    type: Literal["string", "number", "boolean", "json"]


class IdentityCreate(Strict):
    identifier_key: str
    name: str
    identity_type: IdentityType
    project_id: str | None = None
    agent_ids: list[str] | None = None
    block_ids: list[str] | None = None
    properties: list[IdentityProperty] | None = None


class IdentityUpsert(IdentityCreate):
    pass


class IdentityUpdate(Strict):
    identifier_key: str | None = None
    name: str | None = None
    identity_type: IdentityType | None = None
    agent_ids: list[str] | None = None
    block_ids: list[str] | None = None
    properties: list[IdentityProperty] | None = None
