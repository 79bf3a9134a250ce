"""An agent's memory history over HTTP: over REST its commits (all, or a block's), the
memory files as of a commit, a diff between two commits, and a revert that is itself a
commit; and the repository itself for the git program (services/git_http.py)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response

from ...store import memory_files
from ...store.memory_files import MemoryFileError
from ...store.memory_history import MAX_PAGE, unified_diff
from ...store.memory_push import PushRefused, read_push
from ..deps import RuntimeDep
from ..models.memory_history import (
    MemoryCommit,
    MemoryDiff,
    MemorySnapshot,
    RevertMemory,
    RevertResult,
)
from ..models.requests import errors
from ..services.git_http import (
    RECEIVE,
    UPLOAD,
    StoredObjects,
    advertise,
    receive_pack,
    repository,
    request_body,
    upload_pack,
)
from ..services.memory_history import commit_view, git_limits
from .agents import agent_record

router = APIRouter(tags=["memory history"])
PageLimit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Seq = Annotated[int | None, Query(ge=1, le=2**63 - 1)]


@router.get("/v1/agents/{agent_id}/memory/commits", responses=errors(404),
            response_model=list[MemoryCommit])
async def list_memory_commits(agent_id: str, runtime: RuntimeDep, label: str | None = None,
                              limit: PageLimit = 50, before: Seq = None
                              ) -> list[dict[str, Any]]:
    """The agent's memory commits, newest first; only those that changed ``label``'s block
    if given; ``before`` (a commit's ``seq``) pages."""
    return [commit_view(c) for c in await runtime.store.memory_commits(
        agent_id, label=label, limit=limit, before=before)]


@router.get("/v1/agents/{agent_id}/memory/commits/{sha}", responses=errors(404),
            response_model=MemorySnapshot)
async def memory_at_commit(agent_id: str, sha: str, runtime: RuntimeDep,
                           label: str | None = None) -> dict[str, Any]:
    """The memory files as of a commit (a sha, a prefix of 4+ digits, or HEAD); only
    ``label``'s block if given."""
    found, files = await runtime.store.memory_files(agent_id, sha)
    listed = []
    for path, text in sorted(files.items()):
        name = memory_files.label_of(path)
        if label is not None and name != label:
            continue
        try:
            value = None if name is None else memory_files.parse(
                path, text, v2="MEMORY.md" in files).value
        except MemoryFileError:
            value = None
        listed.append({"path": path, "label": name, "value": value, "content": text})
    if label is not None and not listed:
        raise HTTPException(404, f"agent {agent_id!r} had no block {label!r} at {found[:12]}")
    return {"sha": found, "files": listed}


@router.get("/v1/agents/{agent_id}/memory/diff", responses=errors(404),
            response_model=MemoryDiff)
async def memory_diff(agent_id: str, runtime: RuntimeDep,
                      from_commit: Annotated[str, Query(alias="from")],
                      to_commit: Annotated[str, Query(alias="to")] = "HEAD") -> dict[str, Any]:
    """A unified diff of the memory files from one commit to another (default: HEAD)."""
    old, before = await runtime.store.memory_files(agent_id, from_commit)
    new, after = await runtime.store.memory_files(agent_id, to_commit)
    diff = await asyncio.to_thread(unified_diff, before, after)  # a whole memory: off the loop
    return {"from_sha": old, "to_sha": new, "diff": diff}


@router.post("/v1/agents/{agent_id}/memory/revert", responses=errors(404),
             response_model=RevertResult)
async def revert_memory(agent_id: str, body: RevertMemory, runtime: RuntimeDep
                        ) -> dict[str, Any]:
    """Set the agent's blocks (or one) back to a commit, as a new commit by the caller; a
    live agent sees the blocks before its next step."""
    await agent_record(runtime, agent_id)
    try:
        sha = await runtime.store.revert_memory(agent_id, body.commit, label=body.label)
    except MemoryFileError as exc:
        raise HTTPException(422, str(exc)) from exc
    if sha is None:
        return {"commit": None}
    made = await runtime.store.memory_commits(agent_id, limit=1)
    return {"commit": commit_view(made[0])}


# --- git's smart HTTP: clone, fetch, pull and push of /v1/git/{agent_id}/state.git ---

_REPO = "/v1/git/{agent_id}/state.git"


@router.get(f"{_REPO}/info/refs", include_in_schema=False)
async def git_refs(agent_id: str, runtime: RuntimeDep, service: str = "") -> Response:
    """The refs of the agent's memory repository, for the service git asks for."""
    if service not in (UPLOAD, RECEIVE):
        raise HTTPException(403, "only git's smart HTTP is served: ask for "
                            "info/refs?service=git-upload-pack or git-receive-pack")
    head, objects = await runtime.store.memory_repository(agent_id, objects=False)
    data = await asyncio.to_thread(lambda: advertise(repository(head, objects), service))
    return Response(data, media_type=f"application/x-{service}-advertisement",
                    headers=_NO_CACHE)


@router.post(f"{_REPO}/git-upload-pack", include_in_schema=False)
async def git_upload_pack(agent_id: str, request: Request, runtime: RuntimeDep) -> Response:
    """A pack of what a clone or fetch wants."""
    body = await _git_body(request, UPLOAD, runtime.settings.max_body_bytes)
    head, objects = await runtime.store.memory_repository(agent_id)
    data = await asyncio.to_thread(lambda: upload_pack(repository(head, objects), body))
    return Response(data, media_type=f"application/x-{UPLOAD}-result", headers=_NO_CACHE)


@router.post(f"{_REPO}/git-receive-pack", include_in_schema=False)
async def git_receive_pack(agent_id: str, request: Request, runtime: RuntimeDep) -> Response:
    """A push: checked whole, then stored as the agent's blocks and history, or refused
    with a message git prints."""
    body = await _git_body(request, RECEIVE, runtime.settings.max_body_bytes)
    head, objects = await runtime.store.memory_repository(agent_id)
    loop = asyncio.get_running_loop()

    def on_push(repo: Any, old: str, new: str) -> None:  # in the worker thread
        store: StoredObjects = repo.object_store
        push = read_push(store.view(), store.stored, store.pushed(), old, new, head)
        asyncio.run_coroutine_threadsafe(runtime.store.push_memory(agent_id, push),
                                         loop).result()

    def serve() -> bytes:
        return receive_pack(repository(head, objects), body, on_push,
                            git_limits(runtime.settings))

    data = await asyncio.to_thread(serve)
    return Response(data, media_type=f"application/x-{RECEIVE}-result", headers=_NO_CACHE)


_NO_CACHE = {"Cache-Control": "no-cache, max-age=0, must-revalidate"}


async def _git_body(request: Request, service: str, limit: int) -> bytes:
    if request.headers.get("content-type") != f"application/x-{service}-request":
        raise HTTPException(415, f"a {service} request is application/x-{service}-request")
    try:
        return await asyncio.to_thread(  # up to the body limit to gunzip: off the loop
            request_body, await request.body(), request.headers.get("content-encoding"), limit)
    except PushRefused as exc:
        raise HTTPException(400, str(exc)) from exc
