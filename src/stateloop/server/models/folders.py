"""Letta's request bodies and response models for folders (and sources, their older name),
their files and passages, and an agent's files, with the spec's field names."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .requests import Lenient
from .responses import EmbeddingConfig, Response


class SourceCreate(Lenient):
    name: str = Field(min_length=1)
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] | None = None
    embedding: str | None = None
    embedding_chunk_size: int | None = None
    embedding_config: dict[str, Any] | None = None


class SourceUpdate(Lenient):
    name: str | None = Field(None, min_length=1)
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] | None = None
    embedding_config: dict[str, Any] | None = None


class Folder(Response):
    id: str
    name: str
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] | None = None
    embedding_config: EmbeddingConfig
    organization_id: str | None = None
    created_at: str | None = None
    updated_at: str | None = None


class Source(Folder):
    vector_db_provider: str = "native"


class FileMetadata(Response):
    id: str
    source_id: str
    file_name: str | None = None
    original_file_name: str | None = None
    file_path: str | None = None
    file_type: str | None = None
    file_size: int | None = None
    processing_status: str
    error_message: str | None = None
    total_chunks: int | None = None
    chunks_embedded: int | None = None
    content: str | None = None
    organization_id: str | None = None
    created_at: str | None = None
    updated_at: str | None = None


class FolderPassage(Response):
    id: str
    text: str
    source_id: str | None = None
    file_id: str | None = None
    file_name: str | None = None
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None
    created_at: str | None = None
    embedding: list[float] | None
    embedding_config: dict[str, Any] | None
    is_deleted: bool = False


class FileStats(Response):
    file_id: str
    file_name: str
    file_size: int | None = None


class SourceStats(Response):
    source_id: str
    source_name: str
    file_count: int = 0
    total_size: int = 0
    files: list[FileStats] = []


class OrganizationSourcesStats(Response):
    total_sources: int = 0
    total_files: int = 0
    total_size: int = 0
    sources: list[SourceStats] = []


class AgentFileAttachment(Response):
    id: str
    file_id: str
    file_name: str
    folder_id: str
    folder_name: str
    is_open: bool
    last_accessed_at: str | None = None
    visible_content: str | None = None
    start_line: int | None = None
    end_line: int | None = None


class PaginatedAgentFiles(Response):
    files: list[AgentFileAttachment]
    next_cursor: str | None = None
    has_more: bool
