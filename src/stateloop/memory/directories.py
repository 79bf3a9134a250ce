"""The ``<directories>`` section of an agent's system prompt (Letta's layout: each attached
folder, each of its files open or closed, an open file's window in full), rendered from what
the store holds. Being in the system prompt, it is never evicted; ``context_overview`` counts
it with core memory. The folders themselves, and opening files, are ``stateloop.files``'."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store.folders import AgentFileRecord, FolderRecord

MAX_FILES_OPEN = 5  # Letta's default max_files_open
VIEW_CHARS = 15_000  # Letta's default per_file_view_window_char_limit


def render(folders: Sequence[FolderRecord], files: Sequence[AgentFileRecord], *,
           max_files_open: int = MAX_FILES_OPEN, view_chars: int = VIEW_CHARS) -> str:
    """The ``<directories>`` section ("" for an agent without folders)."""
    if not folders:
        return ""
    out = ["<directories>", "<file_limits>",
           f"- current_files_open={sum(1 for f in files if f.is_open)}",
           f"- max_files_open={max_files_open}", "</file_limits>"]
    for folder in folders:
        out.append(f'<directory name="{folder.name}">')
        if folder.description:
            out.append(f"<description>{folder.description}</description>")
        if folder.instructions:
            out.append(f"<instructions>{folder.instructions}</instructions>")
        for file in (f for f in files if f.folder_id == folder.id):
            view = file.visible_content if file.is_open else None
            out += [f'<file status="{"open" if view else "closed"}" name="{file.file_name}">',
                    "<metadata>", f"- chars_current={len(view or '')}",
                    f"- chars_limit={view_chars}", "</metadata>"]
            if view:
                out += ["<value>", view, "</value>"]
            out.append("</file>")
        out.append("</directory>")
    out.append("</directories>")
    return "\n".join(out)


async def stored_directories(store: Any, agent_id: str) -> str:
    """The section as the store has it now (one read when the agent has no folders)."""
    folders = await store.list_folders(agent_id=agent_id)
    if not folders:
        return ""
    return render(folders, await store.agent_files(agent_id))
