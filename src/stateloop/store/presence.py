"""Which processes have a SQLite database open: one locked file per open store.

A run left 'running' in the database is interrupted only if no process is still working on
it, and nothing in the database tells a dead process from a live one. So every store holds
a file next to the database, locked (``flock``) for as long as it is open; the lock goes with
its process, however that ends. A file whose lock can be taken belongs to a store that is
gone, and is removed by whoever finds it.

A server writes its address into its file (``announce``): a second process about to work on
the same agents (the CLI, a library ``Agent``) finds it with ``serving`` and talks to the
server instead, rather than keep a copy of an agent's history the server does not see.
"""

from __future__ import annotations

import glob
import logging
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # no file locks (Windows): no one can tell, so no one is seen
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("stateloop.store")


class Presence:
    """This store's locked file next to the database at ``db_path``."""

    def __init__(self, db_path: Path) -> None:
        self._db = db_path
        self.path = db_path.with_name(f"{db_path.name}-open-{secrets.token_hex(8)}")
        self._fd: int | None = None
        if fcntl is None:
            return
        # Locked under another name first: a file is never seen under its final name unlocked.
        hidden = self.path.with_name(f".{self.path.name}")
        try:
            fd = os.open(hidden, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(hidden, self.path)
        except OSError:  # a read-only folder, say: other processes cannot see this one
            logger.warning("cannot create %s; other processes will not know that this one "
                           "has the database open", self.path, exc_info=True)
            return
        self._fd = fd

    def announce(self, address: str) -> None:
        """Write ``address`` (a server's URL) into this store's file, for ``serving``."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, address.encode(), 0)

    def others(self) -> bool:
        """Whether another store (in this process or another) has the database open."""
        alive = False
        for _ in _live(self._db, skip=self.path):  # every file looked at: dead ones go
            alive = True
        return alive

    def close(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None


def serving(db_path: Path) -> str | None:
    """The address a live server announced for the database at ``db_path``, else None."""
    for text in _live(db_path):
        if text:
            return text
    return None


def _live(db_path: Path, skip: Path | None = None) -> Iterator[str]:
    """What each live store's file at ``db_path`` holds (an address, or ''), but ``skip``'s;
    a dead store's file is removed on the way."""
    if fcntl is None:
        return
    for name in glob.glob(glob.escape(str(db_path)) + "-open-*"):
        path = Path(name)
        if path == skip:
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue  # closed meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 2048, 0).decode(errors="replace")
        else:
            path.unlink(missing_ok=True)  # its process died
            continue
        finally:
            os.close(fd)
        yield text
