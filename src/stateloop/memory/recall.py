"""The tools that reach beyond the context window: recall (every message) and archival
(passages searched by meaning)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Literal

from ..messages import Message
from ..tools.base import ToolContext

Role = Literal["user", "assistant", "tool"]


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def _format(messages: list[Message]) -> str:
    if not messages:
        return "No results found."
    return json.dumps([{"timestamp": _when(m.created_at), "role": m.role, "content": m.text}
                       for m in messages], ensure_ascii=False)


async def conversation_search(ctx: ToolContext, query: str, roles: list[Role] | None = None,
                              limit: int = 10, start_date: str | None = None,
                              end_date: str | None = None) -> str:
    """Search prior conversation history, including messages no longer in context.

    Args:
        query: Words to look for (full-text, best match first).
        roles: Only messages from these roles (default: user and assistant).
        limit: The most results to return.
        start_date: Only messages on or after this date (ISO 8601, e.g. 2025-01-31).
        end_date: Only messages on or before this date (a bare date includes that day).
    """
    agent = ctx.agent
    if agent.store is not None:
        hits = await agent.store.search_messages(  # this thread's messages only
            agent.id, query, roles=roles, limit=limit, start_date=start_date,
            end_date=end_date, include_tool=roles is not None and "tool" in roles,
            thread=agent.conversation_id)
        return _format([hit.message for hit in hits])
    return _format(search_in_memory(agent.recall_messages(), query, roles, limit))


def search_in_memory(messages: list[Message], query: str, roles: list[Role] | None,
                     limit: int) -> list[Message]:
    """For an agent without a store: every message is still in memory; rank by shared words."""
    wanted = set(roles or ("user", "assistant"))
    words = {w for w in query.lower().split() if w}
    scored = []
    for index, message in enumerate(messages):
        if message.role not in wanted:
            continue
        text = message.text.lower()
        score = sum(text.count(word) for word in words)
        if score or not words:
            scored.append((score, index, message))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return [message for _, _, message in scored[:limit]]


async def archival_memory_insert(ctx: ToolContext, content: str,
                                 tags: list[str] | None = None) -> str:
    """Add to archival memory; use for facts worth keeping that need no place in core memory.

    Args:
        content: The text to store; it is found later by meaning.
        tags: Labels to filter searches by.
    """
    agent = ctx.agent
    stored = await agent.archival().insert(agent.id, content, tags)
    agent.archival_count += len(stored)
    return f"Stored in archival memory (id {stored[0].id})."


async def archival_memory_search(ctx: ToolContext, query: str, tags: list[str] | None = None,
                                 tag_match_mode: Literal["any", "all"] = "any",
                                 top_k: int = 10, start_datetime: str | None = None,
                                 end_datetime: str | None = None) -> str:
    """Search archival memory by meaning.

    Args:
        query: What to look for; matched by meaning, not exact words.
        tags: Only passages with these tags.
        tag_match_mode: "any" (at least one tag) or "all" (every tag).
        top_k: How many results to return.
        start_datetime: Only passages created at or after this time (ISO 8601).
        end_datetime: Only passages created at or before this time (ISO 8601).
    """
    agent = ctx.agent
    hits = await agent.archival().search(
        agent.id, query, tags=tags, tag_match_mode=tag_match_mode, top_k=top_k,
        start_datetime=start_datetime, end_datetime=end_datetime)
    if not hits:
        return "No results found."
    return json.dumps([{"timestamp": _when(hit.passage.created_at), "content": hit.passage.text,
                        "tags": hit.passage.tags} for hit in hits], ensure_ascii=False)


RECALL_TOOLS = (conversation_search, archival_memory_insert, archival_memory_search)
