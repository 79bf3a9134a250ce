"""Folders and their files as agents use them, over a store and an embedder: uploading
(stored ``pending`` at once; parsed, chunked and embedded in a worker process, its progress
stored as it goes; text and chunks stored whole at the end), attaching a folder to an
agent, opening and closing files in its context (at most ``max_files_open`` open, the least
recently used closed first, as in Letta), and search by meaning over the chunks. Each folder
has one embedding model (its ``embedding_config``): its chunks and the queries searching them
are embedded with it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..memory.directories import MAX_FILES_OPEN, VIEW_CHARS
from ..memory.embedding_models import Embedders, describe, serves
from ..memory.embeddings import Embedder, EmbeddingError, MiniLMEmbedder
from ..memory.vectors import VectorIndex
from ..store.errors import NotFoundError
from ..store.folders import AgentFileRecord, ChunkRecord, FileRecord, FolderRecord
from .parsing import FileRejected, Limits, check
from .processing import Stopped, discard, process, stage
from .text import window

EMBED_BATCH = 64  # chunks an embedder is given at a time (progress is told between them)
PROCESSING = ("pending", "parsing", "embedding")  # Letta's states before completed / error

log = logging.getLogger(__name__)

Duplicates = Literal["skip", "error", "suffix", "replace"]


@dataclass(slots=True)
class ChunkHit:
    chunk: ChunkRecord
    score: float  # cosine similarity


class Folders:
    """Folder operations; ``embedder`` embeds for folders that record its model (and those
    made without a config), ``embedders`` makes the others'. ``on_change(agent_ids)`` is told
    whose open files changed (the server refreshes those agents' context)."""

    def __init__(self, store: Any, embedder: Embedder, embedders: Embedders | None = None, *,
                 max_files_open: int = MAX_FILES_OPEN,
                 view_chars: int = VIEW_CHARS,
                 on_change: Callable[[Sequence[str]], Any] | None = None,
                 limits: Limits | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.embedders = embedders or Embedders.from_environment()
        self._models: dict[str, Embedder] = {}  # folder id -> the embedder of its model
        self.max_files_open = max_files_open
        self.view_chars = view_chars
        self.on_change = on_change
        self.limits = limits = limits or Limits()
        self._slots = asyncio.Semaphore(limits.workers)
        self._jobs: dict[str, tuple[str, asyncio.Task[FileRejected | None]]] = {}
        self._indexes: dict[str, VectorIndex] = {}
        self._lock = asyncio.Lock()

    def embedding_config(self) -> dict[str, Any]:
        """Letta's EmbeddingConfig of ``embedder`` (what a folder made without one records)."""
        return describe(self.embedder) or {
            "embedding_endpoint_type": "openai", "embedding_model": self.embedder.model,
            "embedding_dim": 0, "embedding_chunk_size": 300,
            "handle": f"openai/{self.embedder.model}"}

    async def create(self, name: str, *, description: str | None = None,
                     instructions: str | None = None,
                     metadata: dict[str, Any] | None = None,
                     embedding_config: dict[str, Any] | None = None) -> FolderRecord:
        """A new folder (names are unique), embedded with the model ``embedding_config``
        names (``embedder``'s if none)."""
        return await self.store.create_folder(FolderRecord(
            name=name, description=description, instructions=instructions,
            metadata=dict(metadata or {}),
            embedding_config=embedding_config or self.embedding_config()))

    def embedder_of(self, folder: FolderRecord) -> Embedder:
        """The embedder of the folder's model."""
        found = self._models.get(folder.id)
        if found is None:
            config = folder.embedding_config or {}
            model = config.get("embedding_model")
            found = (self.embedder if model is None or serves(self.embedder, model,
                                                               config.get("embedding_dim"))
                     else self.embedders.get(config))
            self._models[folder.id] = found
        return found

    # -- files -----------------------------------------------------------------------------

    async def upload(self, folder_id: str, name: str, data: bytes, *,
                     duplicates: Duplicates = "suffix") -> tuple[FileRecord, bool]:
        """Upload and wait for processing; (file, skipped). A file that cannot be read raises
        ``FileRejected`` and stores nothing; one the embedder failed on is kept in ``error``
        without chunks, as Letta keeps it."""
        file, skipped = await self.start_upload(folder_id, name, data, duplicates=duplicates)
        job = self._jobs.get(file.id)
        if job is not None:
            await asyncio.wait({job[1]})  # cancelled when the file is deleted meanwhile
            if not job[1].cancelled() and isinstance(rejected := job[1].result(), FileRejected):
                await self.store.delete_file(folder_id, file.id)
                raise rejected
        return await self.store.get_file(file.id, content=False), skipped

    async def start_upload(self, folder_id: str, name: str, data: bytes, *,
                           duplicates: Duplicates = "suffix") -> tuple[FileRecord, bool]:
        """Store the upload as ``pending`` and process it in the background (``parsing``,
        ``embedding``, then ``completed`` or ``error`` with its message, as Letta reports
        it); (file, skipped). What can be told at once — a kind not taken, a file too big,
        empty or binary, a duplicate refused — raises ``FileRejected`` and stores nothing."""
        folder = await self.store.get_folder(folder_id)
        name = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
        if not name:
            raise FileRejected("the upload has no file name")
        kind = check(name, data, self.limits)
        existing = [f for f in await self.store.list_files(folder_id)
                    if f.original_file_name == name]
        if existing and duplicates == "skip":
            return existing[0], True
        if existing and duplicates == "error":
            raise FileRejected(f"file {name!r} already exists in folder {folder.name!r}",
                               status=409)
        if existing and duplicates == "replace":
            for old in existing:
                await self.delete_file(folder_id, old.id)
            existing = []
        file = FileRecord(folder_id=folder_id, file_name=self._unique(folder.name, name,
                                                                      len(existing)),
                          original_file_name=name, file_type=kind, file_size=len(data),
                          processing_status="pending")
        staged = await stage(data)
        try:
            await self.store.add_file(file, [])
        except BaseException:
            await discard(staged)
            raise
        task = asyncio.create_task(self._process(file, staged), name=f"upload {file.id}")
        self._jobs[file.id] = (folder_id, task)
        return file, False

    async def _process(self, file: FileRecord, staged: Path) -> FileRejected | None:
        """Process one upload to its end; a refusal is stored as the file's error (and
        returned), a file deleted meanwhile is let go."""
        try:
            embedder = self.embedder_of(await self.store.get_folder(file.folder_id))
            async with self._slots:
                if not await self.store.update_file(file.id, processing_status="parsing"):
                    return None
                done = await process(staged, file.original_file_name, self.limits,
                                     embed=_worker_embedding(embedder),
                                     progress=lambda report: self._progress(file.id, report))
                vectors = (done.vectors if done.vectors is not None
                           else await self._embed(file.id, done.chunks, embedder))
            await self._complete(file, done.text, done.file_type, done.chunks, vectors,
                                 embedder.model)
        except FileRejected as exc:
            await self.store.update_file(file.id, processing_status="error",
                                         error_message=str(exc))
            return exc
        except EmbeddingError as exc:
            await self.store.update_file(file.id, processing_status="error",
                                         error_message=str(exc), chunks_embedded=0)
        except (Stopped, NotFoundError):
            pass  # deleted while it was processed
        except Exception as exc:
            log.exception("processing upload %s failed", file.id)
            await self.store.update_file(file.id, processing_status="error",
                                         error_message=f"processing failed: {exc}")
        finally:
            self._jobs.pop(file.id, None)
            await discard(staged)
        return None

    async def _progress(self, file_id: str, report: dict[str, Any]) -> bool:
        changes: dict[str, Any] = {}
        if "total_chunks" in report:
            changes.update(processing_status="embedding", total_chunks=report["total_chunks"])
        if "chunks_embedded" in report:
            changes["chunks_embedded"] = report["chunks_embedded"]
        return await self.store.update_file(file_id, **changes)

    async def _embed(self, file_id: str, pieces: list[str], embedder: Embedder) -> Any:
        import numpy as np  # lazy: numpy, for embedded chunks only

        parts = []
        for start in range(0, len(pieces), EMBED_BATCH):
            parts.append(await embedder.embed(pieces[start:start + EMBED_BATCH]))
            if not await self._progress(file_id, {"chunks_embedded":
                                                  min(len(pieces), start + EMBED_BATCH)}):
                raise Stopped(file_id)
        return np.concatenate(parts) if parts else np.zeros((0, 1), dtype=np.float32)

    async def _complete(self, file: FileRecord, text: str, kind: str, pieces: list[str],
                        vectors: Any, model: str) -> None:
        """Store the text and chunks, and open the file in every agent that sees the folder,
        in one transaction (nothing if the file was deleted meanwhile)."""
        file.content, file.file_type, file.processing_status = text, kind, "completed"
        file.total_chunks = file.chunks_embedded = len(pieces)
        chunks = [ChunkRecord(file_id=file.id, folder_id=file.folder_id, text=piece,
                              embedding=vector, embedding_model=model)
                  for piece, vector in zip(pieces, vectors, strict=True)]
        agents = await self.store.folder_agent_ids(file.folder_id)
        views, closed = [], []
        for agent_id in agents:  # the new file opens in every agent that sees the folder
            row = self._row(agent_id, file)
            rows = await self.store.agent_files(agent_id)
            closed += self._open([*rows, row], row, text, None, None)
            views.append(row)
        if await self.store.finish_file(file, chunks, views=views, closed=closed):
            await self._changed(agents)

    async def delete_file(self, folder_id: str, file_id: str) -> None:
        """Delete a file, its chunks and every agent's view of it; processing it stops."""
        await self._stop(lambda folder, file: file == file_id)
        agents = await self.store.folder_agent_ids(folder_id)
        await self.store.delete_file(folder_id, file_id)
        await self._changed(agents)

    async def delete(self, folder_id: str) -> None:
        """Delete a folder, its files and chunks; processing its files stops."""
        await self._stop(lambda folder, file: folder == folder_id)
        agents = await self.store.delete_folder(folder_id)
        self._indexes.pop(folder_id, None)
        await self._changed(agents)

    async def stop_uploads(self) -> None:
        """Stop processing every upload (their workers are killed); those files end in
        ``error`` saying so."""
        stopped = list(self._jobs)
        await self._stop(lambda folder, file: True)
        for file_id in stopped:
            await self.store.update_file(file_id, processing_status="error",
                                         error_message="processing stopped: the server shut "
                                                       "down; upload the file again")

    async def _stop(self, which: Callable[[str, str], bool]) -> None:
        """Cancel the processing of these files (their workers are killed)."""
        tasks = [task for file, (folder, task) in list(self._jobs.items()) if which(folder, file)]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    # -- agents ----------------------------------------------------------------------------

    async def attach(self, agent_id: str, folder_id: str) -> None:
        """Give the agent the folder; its files come into the agent's context, opened up to
        the cap (the newest win), as Letta does."""
        files = [f for f in await self.store.list_files(folder_id, content=True)
                 if f.processing_status not in PROCESSING]  # those open as they complete
        seen = {row.file_id for row in await self.store.agent_files(agent_id)}
        fresh = [self._row(agent_id, f) for f in files if f.id not in seen]
        await self.store.attach_folder(agent_id, folder_id, fresh)
        contents = {f.id: f.content or "" for f in files}
        rows = await self.store.agent_files(agent_id)
        by_file = {r.file_id: r for r in rows}
        changed: list[AgentFileRecord] = []
        for new in fresh:  # oldest first, so the newest stay open
            row = by_file[new.file_id]
            changed += [row, *self._open(rows, row, contents[row.file_id], None, None)]
        await self.store.save_agent_files(agent_id, _unique(changed))
        await self._changed([agent_id])

    async def detach(self, agent_id: str, folder_id: str) -> None:
        """Take the folder and its files from the agent."""
        await self.store.detach_folder(agent_id, folder_id)
        await self._changed([agent_id])

    async def open(self, agent_id: str, file: str, *, offset: int | None = None,
                   length: int | None = None) -> tuple[AgentFileRecord, list[str]]:
        """Open a file (by id or its "folder/file" name) in the agent's context, showing
        ``length`` lines from ``offset`` (0-based; all by default); returns the row and the
        names of files closed to stay within the cap."""
        rows = await self.store.agent_files(agent_id)
        row = next((r for r in rows if file in (r.file_id, r.file_name)), None)
        if row is None:
            names = [r.file_name for r in rows]
            raise NotFoundError(f"{file} not attached - did you get the filename correct? "
                                f"Currently you have the following files attached: {names}")
        if offset is not None and offset < 0:
            raise ValueError(f"offset for file {row.file_name} must be >= 0, got {offset}")
        if length is not None and length < 1:
            raise ValueError(f"length for file {row.file_name} must be >= 1, got {length}")
        content = (await self.store.get_file(row.file_id)).content or ""
        end = None if length is None else (offset or 0) + length
        closed = self._open(rows, row, content, offset, end)
        await self.store.save_agent_files(agent_id, [row, *closed])
        await self._changed([agent_id])
        return row, [r.file_name for r in closed]

    async def close(self, agent_id: str, file_ids: Sequence[str] | None = None,
                    *, keep: Sequence[str] = ()) -> list[str]:
        """Close these files (every open one when None, less those named in ``keep``); the
        names closed."""
        rows = await self.store.agent_files(agent_id)
        if file_ids is not None and (missing := set(file_ids) - {r.file_id for r in rows}):
            raise NotFoundError(f"no file {sorted(missing)[0]!r} attached to agent {agent_id!r}")
        closing = [r for r in rows if r.is_open and r.file_name not in keep
                   and (file_ids is None or r.file_id in file_ids)]
        for row in closing:
            _close(row)
        await self.store.save_agent_files(agent_id, closing)
        await self._changed([agent_id])
        return [r.file_name for r in closing]

    async def touch(self, agent_id: str, names: Sequence[str]) -> None:
        """Mark files as used now (what least-recently-used closing goes by)."""
        rows = [r for r in await self.store.agent_files(agent_id) if r.file_name in names]
        for row in rows:
            row.last_accessed_at = _now()
        await self.store.save_agent_files(agent_id, rows)

    @staticmethod
    def _unique(folder: str, name: str, taken: int) -> str:
        """The file's name in its folder, as Letta makes it: "folder/name", and "name_(N)"
        for the Nth upload of a name already there."""
        if not taken:
            return f"{folder}/{name}"
        stem, dot, ext = name.rpartition(".")
        return f"{folder}/{stem}_({taken}).{ext}" if dot else f"{folder}/{name}_({taken})"

    def _row(self, agent_id: str, file: FileRecord) -> AgentFileRecord:
        return AgentFileRecord(agent_id=agent_id, file_id=file.id, folder_id=file.folder_id,
                               file_name=file.file_name)

    def _open(self, rows: list[AgentFileRecord], row: AgentFileRecord, content: str,
              start: int | None, end: int | None) -> list[AgentFileRecord]:
        """Open ``row`` with its window; close the least recently used others past the cap
        (returned)."""
        view, first, last = window(content, start, end, char_limit=self.view_chars)
        row.is_open, row.visible_content = True, view
        row.start_line, row.end_line = ((first, last) if (start, end) != (None, None)
                                        else (None, None))
        row.last_accessed_at = _now()
        others = sorted((r for r in rows if r.is_open and r.id != row.id),
                        key=lambda r: r.last_accessed_at)
        closed = others[:max(0, len(others) + 1 - self.max_files_open)]
        for other in closed:
            _close(other)
        return closed

    async def _changed(self, agent_ids: Sequence[str]) -> None:
        if self.on_change is not None and agent_ids:
            result = self.on_change(agent_ids)
            if asyncio.iscoroutine(result):
                await result

    # -- search ----------------------------------------------------------------------------

    async def search(self, folder_ids: Sequence[str], query: str, limit: int = 5,
                     ) -> list[ChunkHit]:
        """The chunks of these folders closest in meaning to ``query``, best first: the query
        is embedded once per model, and each folder searched with its own model's vector."""
        vectors: dict[int, Any] = {}
        found_hits = []
        for folder_id in folder_ids:
            embedder = self.embedder_of(await self.store.get_folder(folder_id))
            index = await self._index(folder_id, embedder.model)
            if index is None:
                continue
            if id(embedder) not in vectors:
                vectors[id(embedder)] = (await embedder.embed([query]))[0]
            found_hits += index.search(vectors[id(embedder)], limit)
        hits = sorted(found_hits, key=lambda h: -h.score)[:limit]
        found = {c.id: c for c in await self.store.get_chunks([h.id for h in hits])}
        return [ChunkHit(found[h.id], h.score) for h in hits if h.id in found]

    async def _index(self, folder_id: str, model: str) -> VectorIndex | None:
        """The folder's index of ``model``'s chunks, caught up with those stored since it
        was loaded."""
        import numpy as np  # lazy: numpy, for embedded chunks only

        async with self._lock:
            newest = await self.store.chunk_watermark(folder_id)
            index = self._indexes.get(folder_id)
            if index is not None and index.loaded_until >= newest:
                return index
            rows = await self.store.load_chunk_vectors(
                folder_id, after_seq=index.loaded_until if index is not None else 0)
            rows = [r for r in rows if r[3] == model]  # another model's: unusable
            if index is None:
                if not rows:
                    return None
                index = VectorIndex(rows[0][4], model)
            if rows:
                matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4")
                index.add([r[1] for r in rows], matrix.reshape(len(rows), -1))
            index.loaded_until = newest
            self._indexes[folder_id] = index
            return index


def _worker_embedding(embedder: Embedder) -> dict[str, Any] | None:
    """The offline model is run by the worker (CPU-bound, its memory given back when the
    worker ends); another embedder is called from the server, a batch at a time."""
    if isinstance(embedder, MiniLMEmbedder):
        return {"model_file": str(embedder.model_path()), "threads": 1}
    return None


_last = 0.0


def _now() -> float:
    """A timestamp later than every one before it: files used in one tick still keep their
    order for least-recently-used closing."""
    global _last
    _last = max(time.time(), _last + 1e-6)
    return _last


def _close(row: AgentFileRecord) -> None:
    row.is_open, row.visible_content, row.start_line, row.end_line = False, None, None, None


def _unique(rows: list[AgentFileRecord]) -> list[AgentFileRecord]:
    return list({id(r): r for r in rows}.values())
