"""Letta's conversation shapes: the ``Conversation`` answered, and the bodies its routes take."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ...store.conversations import ConversationRecord
from .requests import Lenient, LettaStreamingRequest, RetrieveStreamRequest
from .responses import Response, iso


class Conversation(Response):
    created_by_id: str | None = None
    last_updated_by_id: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    id: str
    agent_id: str
    summary: str | None = None
    in_context_message_ids: list[str] = Field(default_factory=list)
    isolated_block_ids: list[str] = Field(default_factory=list)
    model: str | None = None
    model_settings: dict[str, Any] | None = None
    last_message_at: str | None = None


class CreateConversation(Lenient):
    summary: str | None = None
    isolated_block_labels: list[str] | None = None
    model: str | None = None
    model_settings: dict[str, Any] | None = None


class UpdateConversation(Lenient):
    summary: str | None = None
    model: str | None = None
    model_settings: dict[str, Any] | None = None


class ConversationMessageRequest(LettaStreamingRequest):
    streaming: bool = True  # Letta streams conversation messages unless told otherwise
    agent_id: str | None = None  # with conversation id "default": the agent's own thread


class ConversationStreamRequest(RetrieveStreamRequest):
    agent_id: str | None = None
    run_id: str | None = None
    otid: str | None = None


class CompactionRequest(Lenient):
    agent_id: str | None = None
    compaction_settings: dict[str, Any] | None = None  # its mode; the agent's strategy writes


def conversation_view(record: ConversationRecord,
                      in_context: list[str] | None = None) -> dict[str, Any]:
    """``Conversation`` for a stored record (``in_context``: the live thread's ids)."""
    return {"id": record.id, "agent_id": record.agent_id, "summary": record.summary,
            "created_at": iso(record.created_at), "updated_at": iso(record.updated_at),
            "in_context_message_ids": (in_context if in_context is not None
                                       else record.in_context_message_ids),
            "isolated_block_ids": record.isolated_block_ids, "model": record.model,
            "model_settings": record.model_settings,
            "last_message_at": (iso(record.last_message_at) if record.last_message_at
                                else None),
            "created_by_id": None, "last_updated_by_id": None}
