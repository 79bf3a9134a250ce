"""Writing an Agent File's agents to a store: all of them, or — when a write fails — none
(what was written is deleted again). Tools are written last, by name, as Letta does: a tool
already stored is replaced by the file's unless ``override_existing_tools`` is off, and
stateloop's built-in and Python tools are never replaced."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..persistence import get_store
from ..store import NotFoundError
from ..store.memory_repo import Author
from .plan import ImportOptions, ImportPlan, plan_import
from .reading import Source, read_agent_file

if TYPE_CHECKING:
    from ..store.sql import SqlStore

# Who commits an imported agent's blocks over the history its file carries, when they differ.
IMPORTER = Author("system", "agent-file", "agent file import")


@dataclass(slots=True)
class ImportResult:
    """What an import made: the new agents' ids (in the file's order) and names, and notes
    on what was left out, kept as is or repaired."""

    agent_ids: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped_tools: list[str] = field(default_factory=list)


async def import_agents(source: Source, *, store: str | SqlStore,
                        options: ImportOptions | None = None) -> ImportResult:
    """Import every agent of an Agent File (a path, bytes or a dict) into ``store``; an
    ``AgentFileError`` (nothing stored) when the file cannot be imported whole."""
    # Reading and planning parse the file and compile its tools' sources: off the event loop.
    plan = await asyncio.to_thread(
        lambda: plan_import(read_agent_file(source), options or ImportOptions()))
    db = await get_store(store)
    notes = await write_plan(db, plan, override_existing_tools=(
        options.override_existing_tools if options else True))
    return ImportResult([a.record.id for a in plan.agents], [a.record.name for a in plan.agents],
                        plan.notes + notes, plan.skipped_tools)


async def write_plan(db: SqlStore, plan: ImportPlan, *, override_existing_tools: bool
                     ) -> list[str]:
    """Store the plan; on any failure delete what was stored and raise. Notes on tools
    that were kept as they were."""
    created: list[str] = []
    groups: list[str] = []
    notes: list[str] = []
    try:
        for agent in plan.agents:
            await db.create_agent(agent.record, agent.blocks)
            created.append(agent.record.id)
            for block_id in agent.shared:
                await db.attach_block(agent.record.id, block_id)
            await db.append_step(agent.record.id, agent.messages,
                                 in_context_ids=agent.record.in_context_message_ids)
            if agent.history is not None:
                await db.import_memory_history(agent.record.id, agent.history.commits,
                                               IMPORTER, "Import agent file")
        for group in plan.groups:
            groups.append((await db.create_group(group)).id)
        for tool in plan.tools:
            try:
                existing = await db.get_tool(tool.name)
            except NotFoundError:
                await db.upsert_tool(tool)
                continue
            if existing.binding and existing.binding.startswith(("builtin:", "python:")):
                notes.append(f"tool {tool.name!r}: this server's own tool of that name is "
                             "kept (the file's source is not used)")
            elif not override_existing_tools:
                if existing.source_code != tool.source_code:
                    notes.append(f"tool {tool.name!r}: the stored tool of that name is kept "
                                 "(override_existing_tools is off)")
            else:
                tool.id = existing.id
                await db.upsert_tool(tool)
    except BaseException:
        for group_id in groups:
            await db.delete_group(group_id)
        for agent_id in reversed(created):  # shared blocks go with their last agent
            await db.delete_agent(agent_id, delete_orphan_blocks=True)
        raise
    return notes
