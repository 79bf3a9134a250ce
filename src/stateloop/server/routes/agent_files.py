"""An agent's folders and files: attaching a folder (``/folders/...`` and the older
``/sources/...``; its files come into the agent's context and the agent gets the file tools),
listing the agent's folders and files, and opening and closing files in its context."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException

from ...files import attach_folder, detach_folder
from ...store import Page
from ..deps import RuntimeDep
from ..models.folders import PaginatedAgentFiles, Source
from ..models.requests import errors
from ..models.responses import AgentState, iso
from ..pagination import Limit, Order
from ..services.runtime import Runtime
from .agents import agent_record, agent_state
from .folders import folder_view, folders

router = APIRouter(tags=["agents"])

# Detach is declared before attach, in each family, so a client walking the document in order
# (the fuzz test does) leaves the folder attached.


async def _attach(runtime: Runtime, agent_id: str, folder_id: str, attach: bool
                  ) -> dict[str, Any]:
    await agent_record(runtime, agent_id)
    await runtime.store.get_folder(folder_id)
    agent = await runtime.agent(agent_id)
    if agent.running:
        raise HTTPException(409, detail=f"agent {agent_id!r} is running; change its folders "
                                        "when the run ends")
    await (attach_folder if attach else detach_folder)(agent, folder_id)
    view = await agent_state(runtime, await runtime.store.get_agent(agent_id))
    view["sources"] = [folder_view(runtime, f, source=True)
                       for f in await runtime.store.list_folders(agent_id=agent_id)]
    return view


@router.patch("/v1/agents/{agent_id}/folders/detach/{folder_id}", responses=errors(404, 409),
              response_model=AgentState | None)
async def detach_folder_from_agent(folder_id: str, agent_id: str, runtime: RuntimeDep,
                                   ) -> dict[str, Any]:
    """Detach a folder; with the last one the file tools go too."""
    return await _attach(runtime, agent_id, folder_id, attach=False)


@router.patch("/v1/agents/{agent_id}/folders/attach/{folder_id}", responses=errors(404, 409),
              response_model=AgentState | None)
async def attach_folder_to_agent(folder_id: str, agent_id: str, runtime: RuntimeDep,
                                 ) -> dict[str, Any]:
    """Attach a folder: its files open in the agent's context (up to the open-file cap) and
    the agent gets ``open_files``, ``grep_files`` and ``semantic_search_files``."""
    return await _attach(runtime, agent_id, folder_id, attach=True)


@router.patch("/v1/agents/{agent_id}/sources/detach/{source_id}", responses=errors(404, 409),
              response_model=AgentState, deprecated=True)
async def detach_source_from_agent(source_id: str, agent_id: str, runtime: RuntimeDep,
                                   ) -> dict[str, Any]:
    """Detach a source."""
    return await _attach(runtime, agent_id, source_id, attach=False)


@router.patch("/v1/agents/{agent_id}/sources/attach/{source_id}", responses=errors(404, 409),
              response_model=AgentState, deprecated=True)
async def attach_source_to_agent(source_id: str, agent_id: str, runtime: RuntimeDep,
                                 ) -> dict[str, Any]:
    """Attach a source (a folder, by its older name)."""
    return await _attach(runtime, agent_id, source_id, attach=True)


async def _agent_folders(runtime: Runtime, agent_id: str, before: str | None,
                         after: str | None, limit: int | None, order: Order,
                         ) -> list[dict[str, Any]]:
    await agent_record(runtime, agent_id)
    found = await runtime.store.list_folders(
        agent_id=agent_id, page=Page(after=after, before=before, limit=limit, order=order))
    return [folder_view(runtime, f, source=True) for f in found]


@router.get("/v1/agents/{agent_id}/folders", responses=errors(404), response_model=list[Source])
async def list_folders_for_agent(agent_id: str, runtime: RuntimeDep, before: str | None = None,
                                 after: str | None = None, limit: Limit = None,
                                 order: Order = "desc",
                                 order_by: Literal["created_at"] = "created_at",
                                 ) -> list[dict[str, Any]]:
    """The folders attached to the agent."""
    return await _agent_folders(runtime, agent_id, before, after, limit, order)


@router.get("/v1/agents/{agent_id}/sources", responses=errors(404), response_model=list[Source],
            deprecated=True)
async def list_agent_sources(agent_id: str, runtime: RuntimeDep, before: str | None = None,
                             after: str | None = None, limit: Limit = None,
                             order: Order = "desc",
                             order_by: Literal["created_at"] = "created_at",
                             ) -> list[dict[str, Any]]:
    """The sources (folders) attached to the agent."""
    return await _agent_folders(runtime, agent_id, before, after, limit, order)


@router.get("/v1/agents/{agent_id}/files", responses=errors(404),
            response_model=PaginatedAgentFiles)
async def list_files_for_agent(agent_id: str, runtime: RuntimeDep, before: str | None = None,
                               after: str | None = None, limit: Limit = None,
                               order: Order = "desc",
                               order_by: Literal["created_at"] = "created_at",
                               cursor: str | None = None,
                               is_open: bool | None = None) -> dict[str, Any]:
    """The agent's files, open or closed, with what an open one shows."""
    await agent_record(runtime, agent_id)
    size = limit or 20
    chosen = await runtime.store.agent_files(
        agent_id, Page(after=after or cursor, before=before, limit=size + 1, order=order),
        is_open=is_open)
    more = len(chosen) > size
    chosen = chosen[:size]
    names = await runtime.store.folder_names({r.folder_id for r in chosen})
    return {"files": [{"id": r.id, "file_id": r.file_id, "file_name": r.file_name,
                       "folder_id": r.folder_id, "folder_name": names.get(r.folder_id, ""),
                       "is_open": r.is_open, "last_accessed_at": iso(r.last_accessed_at),
                       "visible_content": r.visible_content, "start_line": r.start_line,
                       "end_line": r.end_line} for r in chosen],
            "next_cursor": chosen[-1].id if more and chosen else None, "has_more": more}


@router.patch("/v1/agents/{agent_id}/files/close-all", responses=errors(404),
              response_model=list[str])
async def close_all_files_for_agent(agent_id: str, runtime: RuntimeDep) -> list[str]:
    """Close every open file; the names closed."""
    await agent_record(runtime, agent_id)
    return await folders(runtime).close(agent_id)


@router.patch("/v1/agents/{agent_id}/files/{file_id}/open", responses=errors(404),
              response_model=list[str])
async def open_file_for_agent(file_id: str, agent_id: str, runtime: RuntimeDep) -> list[str]:
    """Open a file in the agent's context; the names of files closed to stay within the cap."""
    await agent_record(runtime, agent_id)
    _, closed = await folders(runtime).open(agent_id, file_id)
    return closed


@router.patch("/v1/agents/{agent_id}/files/{file_id}/close", responses=errors(404),
              response_model=dict[str, Any])
async def close_file_for_agent(file_id: str, agent_id: str, runtime: RuntimeDep,
                               ) -> dict[str, Any]:
    """Close a file in the agent's context."""
    await agent_record(runtime, agent_id)
    await folders(runtime).close(agent_id, [file_id])
    return {"message": f"File id={file_id} successfully closed"}
