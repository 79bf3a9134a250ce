"""``/v1/folders`` and ``/v1/sources`` (Letta's older name for the same resource): folders,
uploading files into them (answered at once with the file ``pending``; parsed, chunked and
embedded in a worker process while the client polls its ``processing_status``), their files
and passages, and which agents use them.

Each operation is one handler registered under both path families; the fixed paths
(``count``, ``metadata``, ``name/...``) come before ``{folder_id}``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal
from weakref import WeakKeyDictionary

from fastapi import APIRouter, File, HTTPException, Response, UploadFile

from ...files import FileRejected, Folders, Limits
from ...files.context import refresh
from ...store import Page
from ...store.folders import ChunkRecord, FileRecord, FolderRecord
from ..deps import RuntimeDep
from ..models.folders import (
    FileMetadata,
    Folder,
    FolderPassage,
    OrganizationSourcesStats,
    Source,
    SourceCreate,
    SourceUpdate,
)
from ..models.requests import errors
from ..models.responses import iso
from ..pagination import Limit, Order
from ..services.agent_fields import embedding_config
from ..services.runtime import Runtime

router = APIRouter(tags=["folders"])

ORGANIZATION_ID = "org-00000000-0000-4000-8000-000000000000"  # Letta's default organization
FAMILIES = (("folders", "folder_id", Folder), ("sources", "source_id", Source))
_folders: WeakKeyDictionary[Runtime, Folders] = WeakKeyDictionary()


def folders(runtime: Runtime) -> Folders:
    """The server's ``Folders``: its embedder, and live agents refreshed when their files
    change."""
    found = _folders.get(runtime)
    if found is None:
        async def changed(agent_ids: Sequence[str]) -> None:
            for agent_id in agent_ids:
                live = runtime.live(agent_id)
                if live is not None:
                    await refresh(live)

        config = runtime.settings
        limits = Limits(max_bytes=config.max_upload_bytes, max_pages=config.upload_max_pages,
                        max_chars=config.upload_max_chars,
                        max_chunks=config.upload_max_chunks,
                        cpu_seconds=config.upload_cpu_seconds,
                        memory_mb=config.upload_memory_mb, workers=config.upload_workers)
        found = _folders[runtime] = Folders(runtime.store, runtime.embedder(),
                                            runtime.embedders, on_change=changed,
                                            limits=limits)
    return found


async def close_folders(runtime: Runtime) -> None:
    """Stop the server's uploads in progress (at shutdown)."""
    found = _folders.pop(runtime, None)
    if found is not None:
        await found.stop_uploads()


def folder_view(runtime: Runtime, folder: FolderRecord, *,
                source: bool = False) -> dict[str, Any]:
    """Letta's ``Folder`` (or ``Source``). A folder stored without an ``embedding_config``
    shows the config of what embeds it: the server's default."""
    config = folder.embedding_config or folders(runtime).embedding_config()
    view = {"id": folder.id, "name": folder.name, "description": folder.description,
            "instructions": folder.instructions, "metadata": folder.metadata,
            "embedding_config": config, "organization_id": ORGANIZATION_ID,
            "created_at": iso(folder.created_at), "updated_at": iso(folder.updated_at)}
    return {**view, "vector_db_provider": "native"} if source else view


def file_view(file: FileRecord, *, content: bool = False) -> dict[str, Any]:
    """Letta's ``FileMetadata``."""
    return {"id": file.id, "source_id": file.folder_id, "file_name": file.file_name,
            "original_file_name": file.original_file_name, "file_path": None,
            "file_type": file.file_type, "file_size": file.file_size,
            "processing_status": file.processing_status, "error_message": file.error_message,
            "total_chunks": file.total_chunks, "chunks_embedded": file.chunks_embedded,
            "content": file.content if content else None, "organization_id": ORGANIZATION_ID,
            "created_at": iso(file.created_at), "updated_at": iso(file.updated_at)}


def _passage_view(chunk: ChunkRecord, names: dict[str, str],
                  embedding_config: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": chunk.id, "text": chunk.text, "source_id": chunk.folder_id,
            "file_id": chunk.file_id, "file_name": names.get(chunk.file_id), "metadata": {},
            "tags": None, "created_at": iso(chunk.created_at),
            "embedding": [float(x) for x in chunk.embedding],
            "embedding_config": embedding_config, "is_deleted": False}


def _both(method: str, path: str, *, drop: dict[str, set[str]] | None = None,
          **options: Any) -> Callable[[Any], Any]:
    """Register a handler at ``/v1/folders{path}`` and ``/v1/sources{path}`` (deprecated);
    ``drop`` names the query parameters a family's route does not take in Letta's document
    (the handler gets their defaults)."""

    def register(handler: Any) -> Any:
        for family, param, model in FAMILIES:
            route = path.replace("{id}", "{" + param + "}")
            response_model = options.get("response_model")
            if response_model is Folder:
                response_model = model
            elif response_model == list[Folder]:
                response_model = list[model]  # type: ignore[valid-type]
            router.add_api_route(f"/v1/{family}{route}",
                                 _renamed(handler, param, (drop or {}).get(family, set())),
                                 methods=[method], deprecated=family == "sources",
                                 **{**options, "response_model": response_model})
        return handler

    return register


def _renamed(handler: Any, param: str, drop: set[str]) -> Any:
    """The handler with its ``id`` parameter named as the path names it, less ``drop``."""
    signature = inspect.signature(handler)
    params = [p.replace(name=param) if p.name == "id" else p
              for p in signature.parameters.values() if p.name not in drop]

    @functools.wraps(handler)
    async def wrapper(**kwargs: Any) -> Any:
        if param in kwargs:
            kwargs["id"] = kwargs.pop(param)
        return await handler(**kwargs)

    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return wrapper


# -- fixed paths first ---------------------------------------------------------------------

@_both("GET", "/count", response_model=int)
async def count_folders(runtime: RuntimeDep) -> int:
    """How many folders there are."""
    return len(await runtime.store.list_folders())


@_both("GET", "/metadata", response_model=OrganizationSourcesStats)
async def folders_metadata(runtime: RuntimeDep,
                           include_detailed_per_source_metadata: bool = False) -> dict[str, Any]:
    """Counts and sizes of every folder's files."""
    stats = await runtime.store.folder_stats()
    sources = [{"source_id": folder.id, "source_name": folder.name, "file_count": len(files),
                "total_size": sum(f.file_size for f in files),
                "files": [{"file_id": f.id, "file_name": f.file_name, "file_size": f.file_size}
                          for f in files] if include_detailed_per_source_metadata else []}
               for folder, files in stats]
    return {"total_sources": len(stats), "total_files": sum(s["file_count"] for s in sources),
            "total_size": sum(s["total_size"] for s in sources), "sources": sources}


@router.get("/v1/folders/name/{folder_name}", responses=errors(404), response_model=str,
            deprecated=True)
async def get_folder_by_name(folder_name: str, runtime: RuntimeDep) -> str:
    """The id of the folder with this name."""
    return await _id_by_name(runtime, folder_name)


@router.get("/v1/sources/name/{source_name}", responses=errors(404), response_model=str,
            deprecated=True)
async def get_source_id_by_name(source_name: str, runtime: RuntimeDep) -> str:
    """The id of the source with this name."""
    return await _id_by_name(runtime, source_name)


async def _id_by_name(runtime: Runtime, name: str) -> str:
    found = await runtime.store.list_folders(name=name)
    if not found:
        raise HTTPException(404, detail=f"no folder named {name!r}")
    return found[0].id


# -- folders -------------------------------------------------------------------------------

@_both("POST", "", responses=errors(409), response_model=Folder)
async def create_folder(body: SourceCreate, runtime: RuntimeDep) -> dict[str, Any]:
    """A new folder; its files are embedded with the model its ``embedding`` or
    ``embedding_config`` names (422 if its provider is not configured), else the server's."""
    config = await embedding_config(runtime.embedders, body.embedding, body.embedding_config,
                                    body.embedding_chunk_size, default=True)
    made = await folders(runtime).create(body.name, description=body.description,
                                         instructions=body.instructions,
                                         metadata=body.metadata, embedding_config=config)
    return folder_view(runtime, made)


@_both("GET", "", response_model=list[Folder],
       drop={"sources": {"before", "after", "limit", "order", "order_by", "name"}})
async def list_folders(runtime: RuntimeDep, before: str | None = None,
                       after: str | None = None, limit: Limit = None, order: Order = "asc",
                       order_by: Literal["created_at"] = "created_at",
                       name: str | None = None) -> list[dict[str, Any]]:
    """Folders, oldest first."""
    found = await runtime.store.list_folders(
        name=name, page=Page(after=after, before=before, limit=limit, order=order))
    return [folder_view(runtime, f) for f in found]


@_both("GET", "/{id}", responses=errors(404), response_model=Folder)
async def retrieve_folder(id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """One folder."""
    return folder_view(runtime, await runtime.store.get_folder(id))


@_both("PATCH", "/{id}", responses=errors(404, 409), response_model=Folder)
async def modify_folder(id: str, body: SourceUpdate, runtime: RuntimeDep) -> dict[str, Any]:
    """Change a folder's name, description, instructions or metadata."""
    changes = body.model_dump(exclude_unset=True, exclude={"embedding_config"})
    changes = {k: v for k, v in changes.items() if v is not None or k != "name"}
    if changes.get("metadata") is None:
        changes.pop("metadata", None)
    updated = await runtime.store.update_folder(id, **changes)
    await folders(runtime)._changed(await runtime.store.folder_agent_ids(id))
    return folder_view(runtime, updated)


@_both("DELETE", "/{id}", responses=errors(404), response_model=None)
async def delete_folder(id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Delete a folder, its files and passages; agents lose it."""
    await folders(runtime).delete(id)
    return {}


# -- files ---------------------------------------------------------------------------------

Duplicates = Literal["skip", "error", "suffix", "replace"]


@_both("POST", "/{id}/upload", responses=errors(404, 409, 413, 415), response_model=FileMetadata)
async def upload_file(id: str, runtime: RuntimeDep, file: Annotated[UploadFile, File()],
                      duplicate_handling: Duplicates = "suffix",
                      name: str | None = None) -> Any:
    """Upload a file: answered at once with the file ``pending``, then parsed, chunked and
    embedded in a worker (poll the file for ``completed``, or ``error`` and its message); a
    file refused at once (its kind, size, empty or binary bytes) stores nothing."""
    await runtime.store.get_folder(id)  # 404 before reading the upload
    data = await file.read()
    try:
        stored, skipped = await folders(runtime).start_upload(
            id, name or file.filename or "", data, duplicates=duplicate_handling)
    except FileRejected as exc:  # a 422 in FastAPI's shape, naming the field
        detail: Any = (str(exc) if exc.status != 422
                       else [{"loc": ["body", "file"], "msg": str(exc), "type": "value_error"}])
        raise HTTPException(exc.status, detail=detail) from None
    if skipped:
        return Response(FileMetadata(**file_view(stored)).model_dump_json(),
                        media_type="application/json", headers={"X-Upload-Result": "skipped"})
    return file_view(stored)


@_both("GET", "/{id}/files", responses=errors(404), response_model=list[FileMetadata],
       drop={"folders": {"check_status_updates"}, "sources": {"before", "order", "order_by"}})
async def list_folder_files(id: str, runtime: RuntimeDep, before: str | None = None,
                            after: str | None = None, limit: Limit = None,
                            order: Order = "asc",
                            order_by: Literal["created_at"] = "created_at",
                            include_content: bool = False,
                            check_status_updates: bool = True) -> list[dict[str, Any]]:
    """The folder's files."""
    found = await runtime.store.list_files(
        id, content=include_content,
        page=Page(after=after, before=before, limit=limit, order=order))
    return [file_view(f, content=include_content) for f in found]


@_both("GET", "/{id}/files/{file_id}", responses=errors(404), response_model=FileMetadata)
async def retrieve_file(id: str, file_id: str, runtime: RuntimeDep,
                        include_content: bool = False) -> dict[str, Any]:
    """One file of the folder."""
    found = await runtime.store.get_file(file_id, content=include_content)
    if found.folder_id != id:
        raise HTTPException(404, detail=f"no file {file_id!r} in folder {id!r}")
    return file_view(found, content=include_content)


@_both("DELETE", "/{id}/{file_id}", responses=errors(404), status_code=204,
       response_class=Response, response_model=None)
async def delete_file(id: str, file_id: str, runtime: RuntimeDep) -> Response:
    """Delete a file, its passages, and every agent's view of it."""
    await folders(runtime).delete_file(id, file_id)
    return Response(status_code=204)


@_both("GET", "/{id}/passages", responses=errors(404), response_model=list[FolderPassage],
       drop={"sources": {"order", "order_by"}})
async def list_folder_passages(id: str, runtime: RuntimeDep, before: str | None = None,
                               after: str | None = None, limit: Limit = None,
                               order: Order = "asc",
                               order_by: Literal["created_at"] = "created_at",
                               ) -> list[dict[str, Any]]:
    """The folder's passages (its files' chunks), in the order they were stored, with their
    vectors and the folder's ``embedding_config``."""
    folder = await runtime.store.get_folder(id)
    chunks = await runtime.store.list_chunks(
        id, Page(after=after, before=before, limit=limit, order=order))
    names = await runtime.store.file_names_by_id([c.file_id for c in chunks])
    return [_passage_view(c, names, folder.embedding_config) for c in chunks]


@_both("GET", "/{id}/agents", responses=errors(404), response_model=list[str],
       drop={"sources": {"before", "after", "limit", "order", "order_by"}})
async def list_folder_agents(id: str, runtime: RuntimeDep, before: str | None = None,
                             after: str | None = None, limit: Limit = None,
                             order: Order = "asc",
                             order_by: Literal["created_at"] = "created_at") -> list[str]:
    """Ids of the agents the folder is attached to."""
    return await runtime.store.folder_agent_ids(
        id, Page(after=after, before=before, limit=limit, order=order))
