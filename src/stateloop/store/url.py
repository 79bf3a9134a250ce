"""Where the database is: an explicit URL, ``STATELOOP_DATABASE_URL``, or ``~/.stateloop/``.

``sqlite:///PATH`` (a file, the embedded default) or ``postgresql://USER@HOST/DB`` (a server,
through psycopg 3; see postgres.py)."""

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
    """A parsed database URL; ``driver`` picks the runner (see runner.py, postgres.py)."""

    raw: str
    dialect: str  # "sqlite" or "postgresql"
    driver: str  # "pysqlite" (default) or "aiosqlite"; "psycopg" for PostgreSQL
    path: Path | None  # the SQLite file; None for a server

    def sync_url(self) -> str:
        if self.dialect == "postgresql":
            return "postgresql+psycopg://" + self.raw.partition("://")[2]
        return f"sqlite+pysqlite:///{self.path}"

    def async_url(self) -> str:
        return f"sqlite+aiosqlite:///{self.path}"

    def conninfo(self) -> str:
        """The PostgreSQL URL as libpq takes it (for a psycopg connection of our own)."""
        return "postgresql://" + self.raw.partition("://")[2]


def resolve_url(url: str | os.PathLike[str] | None = None) -> DatabaseURL:
    """Parse ``url`` (or the environment, or the default) into a ``DatabaseURL``."""
    if url is None:
        url = os.environ.get(ENV_VAR) or f"sqlite:///{default_path()}"
    raw = os.fspath(url)
    if "://" not in raw:  # a bare filesystem path
        return DatabaseURL(raw, "sqlite", "pysqlite", Path(raw).expanduser())
    scheme, _, rest = raw.partition("://")
    dialect, _, driver = scheme.partition("+")
    if dialect in ("postgres", "postgresql"):
        if driver not in ("", "psycopg"):
            raise DatabaseOpenError(
                f"cannot open database {raw!r}: unsupported PostgreSQL driver {driver!r}; "
                "use 'postgresql://...' (psycopg 3)")
        return DatabaseURL(raw, "postgresql", "psycopg", None)
    if dialect != "sqlite":
        raise DatabaseOpenError(
            f"cannot open database {raw!r}: unsupported scheme {scheme!r}; "
            "use 'sqlite:///PATH' or 'postgresql://USER@HOST/DATABASE'")
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
