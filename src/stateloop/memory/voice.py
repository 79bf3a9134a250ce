"""Letta's voice memory tools: ``search_memory`` for the conversational agent, and
``store_memories``, ``rethink_user_memory`` and ``finish_rethinking_memory`` for the memory
agent that keeps its memory.

As in Letta, the memory agent files chunks of the transcript it reviews in the archival memory
of the agent whose conversation it is (its main agent, when it is the memory agent of a
sleep-time group; else its own), and rewrites the ``human`` block; the conversational agent
searches its archival memory with the user's latest message, and its conversation with
keywords.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Annotated, Any
from xml.etree import ElementTree

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from ..tools.base import ToolContext
from . import live_blocks
from .editing import find_block, write_block
from .recall import search_in_memory
from .sleeptime_prompt import REMINDER

USER_BLOCK = "human"  # the block rethink_user_memory rewrites (Letta's target label)
ARCHIVAL_RESULTS = 5
KEYWORD_RESULTS = 3


class MemoryChunk(BaseModel):
    """A run of transcript lines to keep, with what they tell."""

    model_config = ConfigDict(extra="forbid")

    start_index: int = Field(
        description="Zero-based index of the first evicted line in this chunk.")
    end_index: int = Field(description="Zero-based index of the last evicted line (inclusive).")
    context: str = Field(
        description="1-3 sentence paraphrase capturing key facts/details, user preferences, "
                    "or goals that this chunk reveals—written for future retrieval.")


def _inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema written out in place (no ``$ref``), without titles."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    for prop in schema["properties"].values():
        prop.pop("title", None)
    return schema


Chunk = Annotated[MemoryChunk, WithJsonSchema(_inline_schema(MemoryChunk))]


def _latest_user_text(agent: Any) -> str:
    return next((m.text for m in reversed(agent.messages) if m.role == "user"), "")


def _transcript_lines(agent: Any) -> list[str]:
    """The lines of the transcript the agent was given to review: its latest user message
    (past the sleep-time agent's instructions, when it is a memory agent's input)."""
    text = _latest_user_text(agent)
    return text.removeprefix(REMINDER).split("\n")


def _memory_text(lines: list[str], context: str) -> str:
    """Letta's stored form of a chunk: ``<memory><messages><message>..</message>..
    </messages><context>..</context></memory>``."""
    root = ElementTree.Element("memory")
    messages = ElementTree.SubElement(root, "messages")
    for line in lines:
        ElementTree.SubElement(messages, "message").text = line
    ElementTree.SubElement(root, "context").text = context
    return ElementTree.tostring(root, encoding="unicode")


async def _conversation_owner(agent: Any) -> str:
    """The id of the agent whose conversation this agent's memory work is about: the main
    agent of the sleep-time group it is the memory agent of, else itself."""
    for group in await agent.store.list_groups(manager_type="sleeptime", agent_id=agent.id):
        if agent.id in group.agent_ids and group.manager_agent_id:
            return str(group.manager_agent_id)
    return str(agent.id)


async def store_memories(ctx: ToolContext, chunks: list[Chunk]) -> str:
    """Persist dialogue that is about to fall out of the agent's context window.

    Args:
        chunks: Each chunk pinpoints a contiguous block of **evicted** lines and provides a
            short, forward-looking synopsis (`context`) that will be embedded for future
            semantic lookup.
    """
    agent = ctx.agent
    lines = _transcript_lines(agent)
    texts = []
    for chunk in chunks:
        start, end = chunk.start_index, chunk.end_index
        if not 0 <= start <= end < len(lines):
            raise ValueError(f"Failed to store memory given start_index {start} and "
                             f"end_index {end}: the transcript's lines are 0 to "
                             f"{len(lines) - 1}")
        texts.append(_memory_text(lines[start:end + 1], chunk.context))
    if not texts:
        return ""
    if agent.store is None:
        raise ValueError("Failed to store memory: archival memory needs a persisted agent")
    owner = await _conversation_owner(agent)
    stored = await agent.archival().insert(owner, texts)
    if owner == agent.id:
        agent.archival_count += len(stored)
    return ""


async def rethink_user_memory(ctx: ToolContext, new_memory: str) -> str:
    """Rewrite memory block for the main agent, new_memory should contain all current
    information from the block that is not outdated or inconsistent, integrating any new
    information, resulting in a new memory block that is organized, readable, and
    comprehensive.

    Args:
        new_memory: The new memory with information integrated from the memory block. If
            there is no new information, then this should be the same as the content in the
            source block.
    """
    agent = ctx.agent
    try:
        block = find_block(agent, USER_BLOCK)
    except ValueError:
        await live_blocks.add_block(agent, USER_BLOCK, new_memory)
        return ""
    write_block(agent, block, new_memory)
    return ""


async def finish_rethinking_memory(ctx: ToolContext) -> str:
    """This function is called when the agent is done rethinking the memory."""
    return ""


async def search_memory(ctx: ToolContext, convo_keyword_queries: list[str] | None = None,
                        start_minutes_ago: int | None = None,
                        end_minutes_ago: int | None = None) -> str:
    """Look in long-term or earlier-conversation memory only when the user asks about
    something missing from the visible context. The user's latest utterance is sent
    automatically as the main query.

    Args:
        convo_keyword_queries: Extra keywords (e.g., order ID, place name). Use *null* if not
            appropriate for the latest user message.
        start_minutes_ago: Newer bound of the time window for results, specified in minutes
            ago. Use *null* if no lower time bound is needed.
        end_minutes_ago: Older bound of the time window, in minutes ago. Use *null* if no
            upper bound is needed.
    """
    agent = ctx.agent
    now = time.time()
    start = None if end_minutes_ago is None else now - 60 * end_minutes_ago
    end = None if start_minutes_ago is None else now - 60 * start_minutes_ago
    if start is not None and end is not None and start > end:
        start, end = end, start
    query = _latest_user_text(agent)
    archival: list[dict[str, str]] = []
    if agent.store is not None and query.strip():
        hits = await agent.archival().search(agent.id, query, top_k=ARCHIVAL_RESULTS,
                                             start_datetime=start, end_datetime=end)
        archival = [{"timestamp": str(datetime.fromtimestamp(hit.passage.created_at, UTC)),
                     "content": hit.passage.text} for hit in hits]
    response: dict[str, Any] = {"archival_search_results": archival}
    if convo_keyword_queries:
        found: dict[str, list[str]] = {}
        for keyword in convo_keyword_queries:
            if agent.store is not None:
                said = await agent.store.search_messages(
                    agent.id, keyword, limit=KEYWORD_RESULTS, thread=agent.conversation_id)
                texts = [hit.message.text for hit in said]
            else:
                texts = [m.text for m in search_in_memory(agent.recall_messages(), keyword,
                                                          None, KEYWORD_RESULTS)]
            if texts:
                found[keyword] = texts
        response["convo_keyword_search_results"] = found
    return json.dumps(response, indent=2, ensure_ascii=False)


VOICE_TOOLS = (search_memory, store_memories, rethink_user_memory, finish_rethinking_memory)
