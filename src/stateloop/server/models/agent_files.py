"""Letta's request and response shapes for Agent File import and export."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ImportedAgentsResponse(BaseModel):
    """Response model for imported agents"""

    model_config = ConfigDict(extra="forbid")

    agent_ids: list[str] = Field(..., description="List of IDs of the imported agents")
    notes: list[str] = Field(default_factory=list, description=(
        "What the import left out, kept as it was or repaired (a block's limit raised to fit "
        "its value), one line each"))


class ExportAgentRequest(BaseModel):
    """Request body for POST /export endpoint."""

    skills: list[dict[str, Any]] = Field(default_factory=list)
    conversation_id: str | None = None
    scrub_messages: bool = False
