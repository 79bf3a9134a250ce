"""Where the database is: an explicit URL, ``STATELOOP_DATABASE_URL``, or ``~/.stateloop/``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from stateloop.store.errors import DatabaseOpenError

ENV_VAR = "STATELOOP_DATABASE_URL"


def default_path() -> Path:
    """The embedded default: ``~/.stateloop/stateloop.db``."""
    return Path.home() / ".stateloop" / "stateloop.db"


@dataclass(frozen=True, slots=True)
class DatabaseURL:
    """A parsed database URL; ``driver`` picks the SQLite runner (see runner.py)."""

    raw: str
    dialect: str  # "sqlite"
    driver: str  # "pysqlite" (default) or "aiosqlite"
    path: Path

    def sync_url(self) -> str:
        return f"sqlite+pysqlite:///{self.path}"

    def async_url(self) -> str:
        return f"sqlite+aiosqlite:///{self.path}"


def resolve_url(url: str | os.PathLike[str] | None = None) -> DatabaseURL:
    """Parse ``url`` (or the environment, or the default) into a ``DatabaseURL``."""
    if url is None:
        url = os.environ.get(ENV_VAR) or f"sqlite:///{default_path()}"
    raw = os.fspath(url)
    if "://" not in raw:  # a bare filesystem path
        return DatabaseURL(raw, "sqlite", "pysqlite", Path(raw).expanduser())
    scheme, _, rest = raw.partition("://")
    dialect, _, driver = scheme.partition("+")
    if dialect != "sqlite":
        hint = (" PostgreSQL support is planned but not implemented yet."
                if dialect in ("postgres", "postgresql") else "")
        raise DatabaseOpenError(
            f"cannot open database {raw!r}: unsupported scheme {scheme!r}; "
            f"use 'sqlite:///PATH'.{hint}")
    if driver not in ("", "pysqlite", "aiosqlite"):
        raise DatabaseOpenError(
            f"cannot open database {raw!r}: unsupported SQLite driver {driver!r}; "
            "use 'sqlite:///PATH' or 'sqlite+aiosqlite:///PATH'")
    # sqlite:///relative.db and sqlite:////abs/path.db, as SQLAlchemy reads them
    path = rest[1:] if rest.startswith("/") else rest
    path = path.split("?", 1)[0]
    if path in ("", ":memory:"):
        raise DatabaseOpenError(
            f"cannot open database {raw!r}: in-memory SQLite is not supported "
            "(each connection would see a different database); give a file path")
    return DatabaseURL(raw, "sqlite", driver or "pysqlite", Path(path).expanduser())
