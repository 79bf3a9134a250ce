"""Letta's request bodies and response models for archives and for the search operations
(messages across agents, passages), with the spec's field names."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .requests import INT64_MAX, Lenient
from .responses import EmbeddingConfig, Passage, Response

SearchLimit = Field(50, ge=1, le=INT64_MAX)


class ArchiveCreateRequest(Lenient):
    name: str = Field(min_length=1)
    embedding_config: dict[str, Any] | None = None
    embedding: str | None = None
    description: str | None = None


class ArchiveUpdateRequest(Lenient):
    name: str | None = Field(None, min_length=1)
    description: str | None = None


class PassageCreateRequest(Lenient):
    text: str = Field(min_length=1)
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None
    created_at: str | None = None


class PassageBatchCreateRequest(Lenient):
    passages: list[PassageCreateRequest]


class MessageSearchRequest(Lenient):
    query: str | None = None
    search_mode: Literal["vector", "fts", "hybrid"] = "hybrid"
    roles: list[Literal["assistant", "user", "tool", "system", "approval"]] | None = None
    agent_id: str | None = None
    project_id: str | None = None
    template_id: str | None = None
    conversation_id: str | None = None
    limit: int = SearchLimit
    start_date: str | None = None
    end_date: str | None = None


class SearchAllMessagesRequest(Lenient):
    query: str
    search_mode: Literal["vector", "fts", "hybrid"] = "hybrid"
    agent_id: str | None = None
    conversation_id: str | None = None
    limit: int = SearchLimit
    start_date: str | None = None
    end_date: str | None = None


class PassageSearchRequest(Lenient):
    query: str | None = None
    agent_id: str | None = None
    archive_id: str | None = None
    tags: list[str] | None = None
    tag_match_mode: Literal["any", "all"] = "any"
    limit: int = SearchLimit
    start_date: str | None = None
    end_date: str | None = None


class Archive(Response):
    id: str
    name: str
    description: str | None = None
    organization_id: str
    vector_db_provider: str = "native"
    embedding_config: EmbeddingConfig | None = None
    metadata: dict[str, Any] | None = None
    created_at: str
    updated_at: str | None = None


class PassageSearchResult(Response):
    passage: Passage
    score: float
    metadata: dict[str, Any] = {}


class StoredMessage(Response):
    """Letta's ``Message``: the stored form, not a LettaMessage."""

    id: str
    role: str
    agent_id: str | None = None
    run_id: str | None = None
    created_at: str | None = None
    content: list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    is_err: bool | None = None


class MessageSearchResult(Response):
    embedded_text: str
    message: StoredMessage
    fts_rank: int | None = None
    vector_rank: int | None = None
    rrf_score: float


class ContentListResult(Response):
    """Letta's System-, User- and AssistantMessageListResult."""

    message_type: Literal["system_message", "user_message", "assistant_message"]
    content: str | list[dict[str, Any]]
    message_id: str
    agent_id: str | None = None
    conversation_id: str | None = None
    created_at: str


class ReasoningListResult(Response):
    """Letta's ReasoningMessageListResult."""

    message_type: Literal["reasoning_message"]
    reasoning: str
    message_id: str
    agent_id: str | None = None
    conversation_id: str | None = None
    created_at: str


MessageListResult = ContentListResult | ReasoningListResult
