"""Folders in the store (Letta's sources): their files, the files' chunks with embeddings,
and which agents see which folders and files (open or closed, with the window in view).

A file is stored whole in one transaction with its chunks, so a failed upload leaves nothing.
Deleting a folder deletes its files, chunks and attachments; detaching one from an agent
drops the agent's file rows of that folder.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from stateloop.store import dialect, schema
from stateloop.store.errors import DuplicateError, NotFoundError
from stateloop.store.paging import keyset
from stateloop.store.projects import acting_project
from stateloop.store.records import EVERYTHING, Page, new_record_id
from stateloop.store.runner import Runner

fo = schema.folders
fi = schema.files
fp = schema.file_passages
fa = schema.folders_agents
fg = schema.files_agents


@dataclass(slots=True)
class FolderRecord:
    """A named set of files (Letta's Source / Folder)."""

    name: str
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding_config: dict[str, Any] | None = None
    id: str = field(default_factory=lambda: new_record_id("source"))
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class FileRecord:
    """An uploaded file, its text as parsed, and how its processing went."""

    folder_id: str
    file_name: str
    original_file_name: str
    file_type: str
    file_size: int
    content: str | None = None  # None when read without content
    processing_status: str = "completed"
    error_message: str | None = None
    total_chunks: int = 0
    chunks_embedded: int = 0
    id: str = field(default_factory=lambda: new_record_id("file"))
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class ChunkRecord:
    """One embedded piece of a file (Letta's source passage)."""

    file_id: str
    folder_id: str
    text: str
    embedding: Any  # a float32 vector
    embedding_model: str
    id: str = field(default_factory=lambda: new_record_id("passage"))
    seq: int = 0
    created_at: float = field(default_factory=time.time)


@dataclass(slots=True)
class AgentFileRecord:
    """A file as one agent sees it: open or closed, and the part of it in view."""

    agent_id: str
    file_id: str
    folder_id: str
    file_name: str  # "folder/file", the name the agent's tools use
    is_open: bool = False
    visible_content: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    last_accessed_at: float = field(default_factory=time.time)
    id: str = field(default_factory=lambda: new_record_id("file_agent"))


_FOLDER = ["id", "name", "description", "instructions", "metadata", "embedding_config",
           "created_at", "updated_at"]
_FILE = ["id", "folder_id", "file_name", "original_file_name", "file_type", "file_size",
         "processing_status", "error_message", "total_chunks", "chunks_embedded",
         "created_at", "updated_at"]
_AGENT_FILE = ["id", "agent_id", "file_id", "folder_id", "file_name", "is_open",
               "visible_content", "start_line", "end_line", "last_accessed_at"]


def agent_folders(conn: Connection, agent_id: str) -> list[FolderRecord]:
    """The folders attached to the agent, oldest first, in a transaction of the caller's."""
    stmt = (select(fo).where(fo.c.id.in_(select(fa.c.folder_id).where(fa.c.agent_id == agent_id)))
            .order_by(fo.c.created_at, fo.c.id))
    return [FolderRecord(**{k: getattr(r, k) for k in _FOLDER}) for r in conn.execute(stmt)]


def agent_file_views(conn: Connection, agent_id: str) -> list[AgentFileRecord]:
    """The agent's files as it sees them, by name, in a transaction of the caller's."""
    stmt = select(fg).where(fg.c.agent_id == agent_id).order_by(fg.c.file_name, fg.c.id)
    return [AgentFileRecord(**{k: getattr(r, k) for k in _AGENT_FILE}) for r in conn.execute(stmt)]


class FoldersMixin:
    """Folder, file and chunk operations of ``SqlStore``."""

    _runner: Runner

    # -- folders ---------------------------------------------------------------------------

    async def create_folder(self, folder: FolderRecord) -> FolderRecord:
        """Store a new folder; names are unique (``DuplicateError``)."""

        def txn(conn: Connection) -> FolderRecord:
            if conn.execute(select(fo.c.id).where(fo.c.name == folder.name)).first():
                raise DuplicateError(f"a folder named {folder.name!r} already exists")
            conn.execute(insert(fo).values({k: getattr(folder, k) for k in _FOLDER}))
            return folder

        return await self._runner.write(txn)

    async def get_folder(self, folder_id: str) -> FolderRecord:
        """The folder with this id (NotFoundError if none)."""
        return await self._runner.read(lambda conn: _folder(conn, folder_id))

    async def list_folders(self, *, name: str | None = None, agent_id: str | None = None,
                           page: Page = EVERYTHING) -> list[FolderRecord]:
        """Folders on ``page`` (default: all, oldest first); by exact ``name``, or those
        attached to ``agent_id``; read in SQL."""
        stmt = select(fo)
        if (project := acting_project.get()) is not None:
            stmt = stmt.where(fo.c.project == project)
        if name is not None:
            stmt = stmt.where(fo.c.name == name)
        if agent_id is not None:
            stmt = stmt.where(fo.c.id.in_(select(fa.c.folder_id).where(fa.c.agent_id == agent_id)))
        return await self._runner.read(
            lambda conn: [FolderRecord(**{k: getattr(r, k) for k in _FOLDER})
                          for r in conn.execute(keyset(conn, stmt, fo, page))])

    async def update_folder(self, folder_id: str, **changes: Any) -> FolderRecord:
        """Change name, description, instructions or metadata; the folder as stored."""

        def txn(conn: Connection) -> FolderRecord:
            _folder(conn, folder_id)
            name = changes.get("name")
            if name is not None and conn.execute(
                    select(fo.c.id).where(fo.c.name == name).where(fo.c.id != folder_id)).first():
                raise DuplicateError(f"a folder named {name!r} already exists")
            if changes:
                conn.execute(update(fo).where(fo.c.id == folder_id)
                             .values(**changes, updated_at=time.time()))
            return _folder(conn, folder_id)

        return await self._runner.write(txn)

    async def delete_folder(self, folder_id: str) -> list[str]:
        """Delete a folder with its files and chunks; the agents it was attached to."""

        def txn(conn: Connection) -> list[str]:
            _folder(conn, folder_id)
            agents = list(conn.execute(select(fa.c.agent_id)
                                       .where(fa.c.folder_id == folder_id)).scalars())
            conn.execute(delete(fg).where(fg.c.folder_id == folder_id))
            conn.execute(delete(fp).where(fp.c.folder_id == folder_id))
            conn.execute(delete(fi).where(fi.c.folder_id == folder_id))
            conn.execute(delete(fo).where(fo.c.id == folder_id))
            return agents

        return await self._runner.write(txn)

    async def folder_stats(self) -> list[tuple[FolderRecord, list[FileRecord]]]:
        """Every folder with its files (without content), for Letta's metadata route."""
        folders = await self.list_folders()
        return [(folder, await self.list_files(folder.id)) for folder in folders]

    # -- files -----------------------------------------------------------------------------

    async def add_file(self, file: FileRecord, chunks: Sequence[ChunkRecord], *,
                       views: Sequence[AgentFileRecord] = (),
                       closed: Sequence[AgentFileRecord] = ()) -> FileRecord:
        """Store a file with its chunks in one transaction, with ``views`` (new file rows of
        the agents that see the folder) and ``closed`` (their files closed to make room)."""

        def txn(conn: Connection) -> FileRecord:
            _folder(conn, file.folder_id)
            values = {k: getattr(file, k) for k in _FILE}
            conn.execute(insert(fi).values(content=file.content, **values))
            _store_contents(conn, chunks, views, closed)
            return file

        return await self._runner.write(txn, offload=len(chunks) > 256)

    async def update_file(self, file_id: str, **changes: Any) -> bool:
        """Record a file's progress (``processing_status``, ``error_message``, chunk counts);
        False when the file is gone (deleted while it was processed)."""

        def txn(conn: Connection) -> bool:
            done = conn.execute(update(fi).where(fi.c.id == file_id)
                                .values(**changes, updated_at=time.time()))
            return bool(done.rowcount)

        return await self._runner.write(txn)

    async def finish_file(self, file: FileRecord, chunks: Sequence[ChunkRecord], *,
                          views: Sequence[AgentFileRecord] = (),
                          closed: Sequence[AgentFileRecord] = ()) -> bool:
        """Store a processed file's text, status and chunks with the agents' new ``views`` of
        it and the files ``closed`` to make room, in one transaction; False (nothing written)
        when the file is gone."""

        def txn(conn: Connection) -> bool:
            values = {k: getattr(file, k) for k in _FILE if k not in ("id", "created_at")}
            done = conn.execute(update(fi).where(fi.c.id == file.id)
                                .values(content=file.content, **values))
            if not done.rowcount:
                return False
            _store_contents(conn, chunks, views, closed)
            return True

        return await self._runner.write(txn, offload=len(chunks) > 256)

    async def fail_interrupted_files(self) -> int:
        """Files a dead process left ``pending``, ``parsing`` or ``embedding`` end in
        ``error`` saying so; how many. Only when no other store has the database open (its
        uploads in progress would look the same)."""
        if self._runner.others_alive():
            return 0

        def txn(conn: Connection) -> int:
            done = conn.execute(
                update(fi).where(fi.c.processing_status.in_(("pending", "parsing", "embedding")))
                .values(processing_status="error", updated_at=time.time(),
                        error_message="processing was interrupted: the server stopped; "
                                      "upload the file again"))
            return int(done.rowcount)

        return await self._runner.write(txn)

    async def get_file(self, file_id: str, *, content: bool = True) -> FileRecord:
        """The file with this id (NotFoundError if none)."""
        return await self._runner.read(lambda conn: _file(conn, file_id, content))

    async def list_files(self, folder_id: str, *, content: bool = False,
                         page: Page = EVERYTHING) -> list[FileRecord]:
        """The folder's files on ``page`` (by default all, oldest first), read in SQL."""
        cols = [fi, ] if content else [getattr(fi.c, k) for k in _FILE]
        stmt = select(*cols).where(fi.c.folder_id == folder_id)

        def txn(conn: Connection) -> list[FileRecord]:
            _folder(conn, folder_id)
            return [_file_record(row, content)
                    for row in conn.execute(keyset(conn, stmt, fi, page))]

        return await self._runner.read(txn)

    async def file_names_by_id(self, file_ids: Sequence[str]) -> dict[str, str]:
        """The names of these files, by id, in one query (a page's files)."""
        stmt = select(fi.c.id, fi.c.file_name).where(fi.c.id.in_(list(set(file_ids))))
        return await self._runner.read(
            lambda conn: {row.id: row.file_name for row in conn.execute(stmt)})

    async def folder_names(self, folder_ids: Collection[str]) -> dict[str, str]:
        """The names of these folders, by id, in one query (a page's folders)."""
        stmt = select(fo.c.id, fo.c.name).where(fo.c.id.in_(list(folder_ids)))
        return await self._runner.read(
            lambda conn: {row.id: row.name for row in conn.execute(stmt)})

    async def file_names(self, folder_id: str) -> set[str]:
        """The names in use in a folder."""
        stmt = select(fi.c.file_name).where(fi.c.folder_id == folder_id)
        return await self._runner.read(lambda conn: set(conn.execute(stmt).scalars()))

    async def delete_file(self, folder_id: str, file_id: str) -> None:
        """Delete a file of a folder, its chunks and the agents' views of it."""

        def txn(conn: Connection) -> None:
            found = conn.execute(select(fi.c.id).where(fi.c.id == file_id)
                                 .where(fi.c.folder_id == folder_id)).first()
            if found is None:
                raise NotFoundError(f"no file {file_id!r} in folder {folder_id!r}")
            for table in (fg, fp):
                conn.execute(delete(table).where(table.c.file_id == file_id))
            conn.execute(delete(fi).where(fi.c.id == file_id))

        await self._runner.write(txn)

    # -- chunks ----------------------------------------------------------------------------

    async def list_chunks(self, folder_id: str, page: Page = EVERYTHING) -> list[ChunkRecord]:
        """The folder's chunks on ``page`` (by default all), in the order they were stored;
        read in SQL."""
        stmt = select(fp).where(fp.c.folder_id == folder_id)
        return await self._runner.read(lambda conn: [
            _chunk(row) for row in conn.execute(keyset(conn, stmt, fp, page, key=(fp.c.seq,)))])

    async def get_chunks(self, ids: Sequence[str]) -> list[ChunkRecord]:
        """Chunks with these ids, in the order given (unknown ids are skipped)."""
        wanted = list(ids)
        stmt = select(fp).where(fp.c.id.in_(wanted))

        def txn(conn: Connection) -> list[ChunkRecord]:
            found = {row.id: _chunk(row) for row in conn.execute(stmt)}
            return [found[i] for i in wanted if i in found]

        return await self._runner.read(txn)

    async def chunk_watermark(self, folder_id: str) -> int:
        """The folder's highest chunk seq (0 if none): a cheap "anything new?"."""
        stmt = select(func.coalesce(func.max(fp.c.seq), 0)).where(fp.c.folder_id == folder_id)
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))

    async def load_chunk_vectors(self, folder_id: str, *, after_seq: int = 0,
                                 ) -> list[tuple[int, str, bytes, str, int]]:
        """(seq, id, vector bytes, model, dim) of the folder's chunks after ``after_seq``."""
        stmt = (select(fp.c.seq, fp.c.id, fp.c.embedding, fp.c.embedding_model,
                       fp.c.embedding_dim).where(fp.c.folder_id == folder_id)
                .where(fp.c.seq > after_seq).order_by(fp.c.seq))
        return await self._runner.read(
            lambda conn: [tuple(row) for row in conn.execute(stmt)])

    # -- agents ----------------------------------------------------------------------------

    async def attach_folder(self, agent_id: str, folder_id: str,
                            rows: Sequence[AgentFileRecord]) -> None:
        """Give the agent the folder and its files (``rows``, one per file not yet seen)."""

        def txn(conn: Connection) -> None:
            _check_agent(conn, agent_id)
            _folder(conn, folder_id)
            if conn.execute(select(fa.c.agent_id).where(fa.c.agent_id == agent_id)
                            .where(fa.c.folder_id == folder_id)).first() is None:
                conn.execute(insert(fa).values(agent_id=agent_id, folder_id=folder_id,
                                               created_at=time.time()))
            seen = set(conn.execute(select(fg.c.file_id).where(fg.c.agent_id == agent_id))
                       .scalars())
            fresh = [r for r in rows if r.file_id not in seen]
            if fresh:
                conn.execute(insert(fg), [{k: getattr(r, k) for k in _AGENT_FILE}
                                          for r in fresh])

        await self._runner.write(txn)

    async def detach_folder(self, agent_id: str, folder_id: str) -> None:
        """Take the folder and its files from the agent."""

        def txn(conn: Connection) -> None:
            _check_agent(conn, agent_id)
            _folder(conn, folder_id)
            for table in (fa, fg):
                conn.execute(delete(table).where(table.c.agent_id == agent_id)
                             .where(table.c.folder_id == folder_id))

        await self._runner.write(txn)

    async def folder_agent_ids(self, folder_id: str, page: Page = EVERYTHING) -> list[str]:
        """The agents on ``page`` (default: all) of those the folder is attached to, in
        attachment order, read in SQL."""
        mine = (fa.c.folder_id == folder_id,)

        def txn(conn: Connection) -> list[str]:
            _folder(conn, folder_id)
            stmt = keyset(conn, select(fa.c.agent_id).where(*mine), fa, page,
                          key=(fa.c.created_at, fa.c.agent_id), ident=fa.c.agent_id, scope=mine)
            return list(conn.execute(stmt).scalars())

        return await self._runner.read(txn)

    async def agent_files(self, agent_id: str, page: Page = EVERYTHING, *,
                          is_open: bool | None = None) -> list[AgentFileRecord]:
        """The agent's files on ``page`` (default: all), by name, open or closed (default:
        both), read in SQL."""
        mine = (fg.c.agent_id == agent_id,)
        stmt = select(fg).where(*mine)
        if is_open is not None:
            stmt = stmt.where(fg.c.is_open == is_open)
        return await self._runner.read(
            lambda conn: [AgentFileRecord(**{k: getattr(r, k) for k in _AGENT_FILE})
                          for r in conn.execute(keyset(conn, stmt, fg, page,
                                                       key=(fg.c.file_name, fg.c.id),
                                                       scope=mine))])

    async def save_agent_files(self, agent_id: str, changed: Sequence[AgentFileRecord]) -> None:
        """Write the open state, window and access time of these file rows of the agent."""

        def txn(conn: Connection) -> None:
            _check_agent(conn, agent_id)
            _save_rows(conn, changed)

        await self._runner.write(txn)


def _store_contents(conn: Connection, chunks: Sequence[ChunkRecord],
                    views: Sequence[AgentFileRecord], closed: Sequence[AgentFileRecord]) -> None:
    """A processed file's chunks, the agents' new views of it and the files closed for it."""
    if chunks:
        conn.execute(insert(fp), [_chunk_values(c) for c in chunks])
    for row in views:
        conn.execute(insert(fg).values({k: getattr(row, k) for k in _AGENT_FILE}))
    _save_rows(conn, closed)


def _save_rows(conn: Connection, changed: Sequence[AgentFileRecord]) -> None:
    for row in changed:
        conn.execute(update(fg).where(fg.c.id == row.id).values(
            is_open=row.is_open, visible_content=row.visible_content,
            start_line=row.start_line, end_line=row.end_line,
            last_accessed_at=row.last_accessed_at))


def _check_agent(conn: Connection, agent_id: str) -> None:
    if conn.execute(select(schema.agents.c.id).where(schema.agents.c.id == agent_id)).first() \
            is None:
        raise NotFoundError(f"agent with id {agent_id!r} not found")


def _folder(conn: Connection, folder_id: str) -> FolderRecord:
    row = conn.execute(select(fo).where(fo.c.id == folder_id)).first()
    if row is None:
        raise NotFoundError(f"no folder {folder_id!r}")
    return FolderRecord(**{k: getattr(row, k) for k in _FOLDER})


def _file(conn: Connection, file_id: str, content: bool) -> FileRecord:
    cols = [fi] if content else [getattr(fi.c, k) for k in _FILE]
    row = conn.execute(select(*cols).where(fi.c.id == file_id)).first()
    if row is None:
        raise NotFoundError(f"no file {file_id!r}")
    return _file_record(row, content)


def _file_record(row: Any, content: bool) -> FileRecord:
    return FileRecord(**{k: getattr(row, k) for k in _FILE},
                      content=row.content if content else None)


def _chunk(row: Any) -> ChunkRecord:
    return ChunkRecord(file_id=row.file_id, folder_id=row.folder_id, text=row.text,
                       embedding=dialect.decode_vector(row.embedding),
                       embedding_model=row.embedding_model, id=row.id, seq=row.seq,
                       created_at=row.created_at)


def _chunk_values(chunk: ChunkRecord) -> dict[str, Any]:
    return {"id": chunk.id, "file_id": chunk.file_id, "folder_id": chunk.folder_id,
            "text": chunk.text, "embedding": dialect.encode_vector(chunk.embedding),
            "embedding_model": chunk.embedding_model, "embedding_dim": len(chunk.embedding),
            "created_at": chunk.created_at}
