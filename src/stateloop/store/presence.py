"""Which processes have a SQLite database open: one locked file per open store.

A run left 'running' in the database is interrupted only if no process is still working on
it, and nothing in the database tells a dead process from a live one. So every store holds
a file next to the database, locked (``flock``) for as long as it is open; the lock goes with
its process, however that ends. A file whose lock can be taken belongs to a store that is
gone, and is removed by whoever finds it.
"""

from __future__ import annotations

import glob
import logging
import os
import secrets
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

    def others(self) -> bool:
        """Whether another store (in this process or another) has the database open."""
        if fcntl is None:
            return False
        alive = False
        for name in glob.glob(glob.escape(str(self._db)) + "-open-*"):
            path = Path(name)
            if path == self.path:
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue  # closed meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                alive = True
            else:
                path.unlink(missing_ok=True)  # its process died
            finally:
                os.close(fd)
        return alive

    def close(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None
