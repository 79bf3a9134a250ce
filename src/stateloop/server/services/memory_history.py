"""Memory history for the REST API: commit records as Letta's ``MemoryCommit``, and the
author of the edits a request makes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ...store.memory_history import MemoryCommitRecord
from ...store.memory_repo import Author, changed_by
from ..middleware import ASGIApp, Receive, Scope, Send
from ..settings import ServerSettings
from .git_http import GitLimits

API_CALLER = Author("user", "api", "REST API")


def commit_view(record: MemoryCommitRecord) -> dict[str, Any]:
    """A commit as Letta's ``MemoryCommit`` (with its ``seq``)."""
    return {"id": f"memcommit-{record.sha}", "sha": record.sha,
            "parent_sha": record.parent_sha, "message": record.message,
            "author_type": record.author_type, "author_id": record.author_id,
            "author_name": record.author_name,
            "timestamp": datetime.fromtimestamp(record.timestamp, UTC),
            "files_changed": record.files_changed, "additions": record.additions,
            "deletions": record.deletions, "seq": record.seq}


def git_limits(config: ServerSettings) -> GitLimits:
    """What one push may hold, from the server's settings."""
    return GitLimits(max_objects=config.git_max_objects,
                     max_object_bytes=config.git_max_object_bytes,
                     max_total_bytes=config.git_max_unpacked_bytes)


class MemoryAuthor:
    """Every block change a request makes is a commit by the API caller."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") == "GET":
            await self.app(scope, receive, send)
            return
        token = changed_by.set(API_CALLER)
        try:
            await self.app(scope, receive, send)
        finally:
            changed_by.reset(token)
