"""The step log: queued writes made crash-safe before their transaction commits.

A run whose steps never yield to the event loop (tools that compute, a fast local model)
would otherwise pay a whole SQLite transaction per step to keep DESIGN invariant 3, "a crash
loses at most the step in flight". Instead, when a step begins while earlier writes are
still queued, those writes are appended to this process's log file, and the queue commits
later in one transaction. The file is mapped into memory, so an append is a copy rather than
a system call; like SQLite's WAL with ``synchronous=NORMAL`` (no fsync), it survives the
process, not the machine. The transaction also records the log's batch number in
``step_logs``; the log is emptied once it has committed.

A log file sits next to the database and is locked by its process while that lives (from
the moment it opens the database, so the locks also tell which processes have it open). A
process opening the database applies the logs of dead processes whose batch never
committed, then deletes them. A record cut short by the crash is the step in flight and is
dropped (each record carries its length and checksum).
"""

from __future__ import annotations

import glob
import logging
import mmap
import os
import secrets
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import bindparam, delete, insert, select, update

from stateloop.store.batching import BatchFn
from stateloop.store.fastpath import FastStatement
from stateloop.store.schema import step_logs

try:
    import fcntl
except ImportError:  # no file locks (Windows): no step log, a step commits before the next
    fcntl = None  # type: ignore[assignment]

AVAILABLE = fcntl is not None
logger = logging.getLogger("stateloop.store")
_HEADER = struct.Struct("<II")  # payload length, crc32
_END = _HEADER.pack(0, 0)  # a record of length 0: where the log ends
_INITIAL_SIZE = 1 << 20

_FORGET = FastStatement(delete(step_logs).where(step_logs.c.token == bindparam("token")))
_RECORD = FastStatement(insert(step_logs).values(token=bindparam("token"),
                                                 batch=bindparam("batch")))
_ADVANCE = FastStatement(update(step_logs).where(step_logs.c.token == bindparam("token"))
                         .values(batch=bindparam("batch")))
_COMMITTED = FastStatement(select(step_logs.c.batch).where(
    step_logs.c.token == bindparam("token")))


def _record_batches(conn: Any, batches: list[tuple[str, int]]) -> None:
    for token, batch in batches:
        params = {"token": token, "batch": batch}
        if not _ADVANCE.execute(conn, params):
            _RECORD.execute(conn, params)


# Queued last in a transaction that commits logged writes: it records their batch.
RECORD_BATCH = BatchFn("step_log_batch", _record_batches)


def forget(conn: Any, token: str) -> None:
    """Drop a log's row (its process closed the log, or its log was recovered)."""
    _FORGET.execute(conn, {"token": token})


def committed_batch(conn: Any, token: str) -> int | None:
    """The log's last batch whose transaction committed, if any."""
    found = _COMMITTED.fetch(conn, {"token": token})
    return found[0][0] if found else None


class StepLog:
    """This process's log for one database; the file is created at the first append."""

    def __init__(self, db_path: Path) -> None:
        self.token = secrets.token_hex(8)
        self.path = db_path.with_name(f"{db_path.name}-steplog-{self.token}")
        self.batch = 0  # the batch being logged; ``step_logs`` records it when it commits
        self.records = 0  # records in this batch
        self._end = 0  # where the next record goes
        self._fd: int | None = None
        self._map: mmap.mmap | None = None

    def hold(self) -> None:
        """Create and lock the file now: while this process lives, others see that it has
        the database open (``others_alive``). Without it, they cannot tell."""
        if not AVAILABLE:
            return
        try:
            self._open()
        except OSError:
            logger.warning("cannot create the step log %s", self.path, exc_info=True)

    @property
    def used(self) -> bool:
        """Whether anything was logged (its batches may be recorded in ``step_logs``)."""
        return self._map is not None

    def _open(self) -> int:
        if self._fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._fd = fd
        return self._fd

    def append(self, name: str, payload: Any) -> None:
        """Log one queued write (the transaction that commits it records its batch)."""
        data = _frame([name, payload])
        if not self.records:
            data = _frame(["batch", [self.batch]]) + data
        start, end = self._end, self._end + len(data)
        log = self._mapped(end + len(_END))
        log[end:end + len(_END)] = _END  # first: a record cut short is followed by no older one
        log[start:end] = data
        self._end = end
        self.records += 1

    def _mapped(self, size: int) -> mmap.mmap:
        """The file's mapping, at least ``size`` bytes long. Its blocks are allocated first,
        so a full disk is an OSError here rather than a SIGBUS when the mapping is written."""
        if self._map is not None and size <= len(self._map):
            return self._map
        fd = self._open()
        length = max(_INITIAL_SIZE, 2 * len(self._map) if self._map is not None else 0,
                     size + mmap.PAGESIZE)
        _allocate(fd, length)
        if self._map is not None:
            self._map.close()
        self._map = mmap.mmap(fd, length)
        return self._map

    def committed(self) -> None:
        """The batch's transaction ended (its writes landed or failed for good): empty it."""
        if self.records and self._map is not None:
            self._map[:len(_END)] = _END
            self._end = self.records = 0
            self.batch += 1

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self.path.unlink(missing_ok=True)


def _allocate(fd: int, length: int) -> None:
    """Give the file ``length`` bytes of allocated blocks (zeros)."""
    size = os.fstat(fd).st_size
    if size >= length:
        return
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, size, length - size)
    else:  # macOS: write the zeros
        os.pwrite(fd, bytes(length - size), size)


@dataclass(slots=True)
class DeadLog:
    """The log of a process that died: its batch number and the writes it logged."""

    path: Path
    token: str
    batch: int
    writes: list[tuple[str, Any]]
    fd: int

    def release(self) -> None:
        os.close(self.fd)


def dead_logs(db_path: Path) -> Iterator[DeadLog]:
    """Logs next to ``db_path`` whose process is gone (held locked while yielded)."""
    if not AVAILABLE:
        return
    prefix = f"{db_path.name}-steplog-"
    for name in sorted(glob.glob(glob.escape(str(db_path)) + "-steplog-*")):
        path = Path(name)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue  # recovered by another process meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # its process is alive
            continue
        records = list(_records(os.pread(fd, os.fstat(fd).st_size, 0)))
        batch = 0  # each batch begins with a record of its number
        if records and records[0][0] == "batch":
            batch = records.pop(0)[1][0]
        writes = [(name, payload) for name, payload in records]  # JSON gave lists
        yield DeadLog(path, path.name[len(prefix):], batch, writes, fd)


def others_alive(db_path: Path, own: Path) -> bool:
    """Whether a process other than the holder of ``own`` (or another store of this one)
    has the database open: its log is locked."""
    if not AVAILABLE:
        return False  # no locks to tell by
    for name in glob.glob(glob.escape(str(db_path)) + "-steplog-*"):
        path = Path(name)
        if path == own:
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue  # closed meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
    return False


def _frame(record: list[Any]) -> bytes:
    data = orjson.dumps(record)
    return _HEADER.pack(len(data), zlib.crc32(data)) + data


def _records(data: bytes) -> Iterator[Any]:
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, offset)
        if length == 0:
            return  # the end
        body = data[offset + _HEADER.size:offset + _HEADER.size + length]
        if len(body) != length or zlib.crc32(body) != crc:
            return  # cut short by the crash: the step in flight
        yield orjson.loads(body)
        offset += _HEADER.size + length
