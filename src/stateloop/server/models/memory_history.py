"""Memory history shapes: Letta's ``MemoryCommit`` (schemas/memory_repo.py), and the bodies
of the history routes stateloop adds."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class MemoryCommit(BaseModel):
    """A commit in an agent's memory repository."""

    id: str = Field(description="memcommit-<sha>")
    sha: str = Field(description="Commit SHA (40-char hex).")
    parent_sha: str | None = Field(None, description="Parent commit SHA.")
    message: str = Field(description="Commit message.")
    author_type: str = Field(description="Author type: agent, user, system.")
    author_id: str = Field(description="Author ID.")
    author_name: str | None = Field(None, description="Human-readable author name.")
    timestamp: datetime = Field(description="Commit timestamp.")
    files_changed: list[str] = Field(default_factory=list, description="Changed file paths.")
    additions: int = Field(0, description="Lines added.")
    deletions: int = Field(0, description="Lines deleted.")
    seq: int = Field(description="Its place in the agent's history: `before` pages on it.")


class MemoryFile(BaseModel):
    """A memory file as of a commit: its block's label and value, and the file's text."""

    path: str
    label: str | None = Field(description="The block it holds; null for a file that is none.")
    value: str | None = Field(description="The block's value (the file's body).")
    content: str = Field(description="The file as git holds it (frontmatter and body).")


class MemorySnapshot(BaseModel):
    """An agent's memory files as of one commit."""

    sha: str
    files: list[MemoryFile]


class MemoryDiff(BaseModel):
    """A unified diff of the memory files between two commits."""

    from_sha: str
    to_sha: str
    diff: str


class RevertMemory(BaseModel):
    """Set the memory (or one block) back to a commit; the revert is a new commit."""

    commit: str = Field(description="A commit SHA (or a unique prefix of 4+ digits), or HEAD.",
                        max_length=64)
    label: str | None = Field(None, description="Only this block; all of them when null.",
                              max_length=1000)


class RevertResult(BaseModel):
    """The commit a revert made (null when the memory already was as at that commit)."""

    commit: MemoryCommit | None
