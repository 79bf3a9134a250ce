"""Letta's filesystem: folders of uploaded files (text, Markdown, CSV, JSON, code, PDF),
parsed, chunked and embedded; attached to agents, whose file tools open, grep and search
them, and whose context shows the files they have open.

    from stateloop.files import Folders, attach_folder

    folders = Folders(agent.store, agent.archival().embedder, agent.archival().embedders)
    docs = await folders.create("docs")
    await folders.upload(docs.id, "guide.md", data)
    await attach_folder(agent, docs.id)   # the agent gets open_files, grep_files, ...
"""

from __future__ import annotations

from typing import Any

from ..tools.builtin import builtin_tool
from .context import refresh
from .folders import MAX_FILES_OPEN, VIEW_CHARS, ChunkHit, Folders
from .parsing import FileRejected, Limits, parse
from .tools import FILE_TOOL_NAMES, folders_of

__all__ = ["MAX_FILES_OPEN", "VIEW_CHARS", "ChunkHit", "FileRejected", "Folders", "Limits",
           "attach_folder", "detach_folder", "parse"]


async def attach_folder(agent: Any, folder_id: str) -> None:
    """Attach a folder to a persisted agent: its files come into the agent's context and the
    agent gets the file tools, as in Letta."""
    await folders_of(agent).attach(agent.id, folder_id)
    await _set_file_tools(agent, FILE_TOOL_NAMES)
    await refresh(agent)


async def detach_folder(agent: Any, folder_id: str) -> None:
    """Detach a folder; with the last one the file tools go too."""
    await folders_of(agent).detach(agent.id, folder_id)
    if not await agent.store.list_folders(agent_id=agent.id):
        await _set_file_tools(agent, ())
    await refresh(agent)


async def _set_file_tools(agent: Any, wanted: tuple[str, ...]) -> None:
    tools = {name: tool for name, tool in agent.tools.items() if name not in FILE_TOOL_NAMES}
    tools.update({name: builtin_tool(name) for name in wanted})
    if list(tools) == list(agent.tools):
        return
    record = await agent.store.get_agent(agent.id)
    names = [n for n in record.tool_names if n not in FILE_TOOL_NAMES] + list(wanted)
    await agent.store.update_agent(agent.id, tool_names=names)
    agent.tools = tools
    agent.memory_changed()
