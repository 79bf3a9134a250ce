"""Where the database is: an explicit URL, ``STATELOOP_DATABASE_URL``, the file named by
``STATELOOP_DATABASE_URL_FILE``, or ``~/.stateloop/``; and the URL as it may be shown.

``sqlite:///PATH`` (a file, the embedded default) or ``postgresql://USER@HOST/DB`` (a server,
through psycopg 3; see postgres.py). Every message, log line and exception that names a
database shows ``hide_password(url)``, its password ``***``; ``DatabaseURL.scrub`` takes the
password out of a driver's message that quotes it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from stateloop.store.errors import DatabaseOpenError

ENV_VAR = "STATELOOP_DATABASE_URL"
# A file holding the URL (a Docker secret, a systemd credential): no password in the
# environment or on a command line.
FILE_ENV_VAR = "STATELOOP_DATABASE_URL_FILE"
HIDDEN = "***"

# libpq takes the password in the query (and in key=value strings) too.
_PASSWORD_PARAM = re.compile(r"(password=)([^&\s]*)", re.IGNORECASE)


def default_path() -> Path:
    """The embedded default: ``~/.stateloop/stateloop.db``."""
    return Path.home() / ".stateloop" / "stateloop.db"


def configured_url() -> str | None:
    """The URL the environment names: ``STATELOOP_DATABASE_URL``, else the contents of the
    file ``STATELOOP_DATABASE_URL_FILE`` names (surrounding whitespace dropped); None when
    neither is set."""
    if url := os.environ.get(ENV_VAR):
        return url
    name = os.environ.get(FILE_ENV_VAR)
    if not name:
        return None
    try:
        url = Path(name).expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise DatabaseOpenError(f"{FILE_ENV_VAR}: cannot read {name!r}: {reason}") from None
    if not url:
        raise DatabaseOpenError(f"{FILE_ENV_VAR}: {name!r} is empty; write the database URL "
                                "in it")
    return url


def _split(url: str) -> tuple[str, str, str] | None:
    """``(scheme://user, password, @rest)`` when ``url`` holds a password before its host.
    The last ``@`` ends the credentials: a password may hold ``@`` or ``/`` unescaped
    (SQLAlchemy reads it so), and hiding too much is harmless."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    user, colon, password = credentials.partition(":")
    if not (sep and at and colon):
        return None
    return f"{scheme}://{user}", password, f"@{host}"


def hide_password(url: str | os.PathLike[str]) -> str:
    """``url`` with its password replaced by ``***``, for messages and logs; never fails."""
    text = raw = os.fspath(url)
    parts = _split(text)
    if parts is not None:
        text = f"{parts[0]}:{HIDDEN}{parts[2]}"
    text = _PASSWORD_PARAM.sub(rf"\g<1>{HIDDEN}", text)
    return _without(text, passwords(raw))  # anywhere else it is written too


def _without(text: str, secrets: set[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):  # a longer form holds a shorter
        text = text.replace(secret, HIDDEN)
    return text


def passwords(url: str) -> set[str]:
    """Every form of the password ``url`` holds, as written and percent-decoded."""
    found = {match[2] for match in _PASSWORD_PARAM.finditer(url)}
    if (parts := _split(url)) is not None:
        found.add(parts[1])
    return {form for secret in found for form in (secret, unquote(secret)) if form}


@dataclass(frozen=True, slots=True)
class DatabaseURL:
    """A parsed database URL; ``driver`` picks the runner (see runner.py, postgres.py)."""

    raw: str
    dialect: str  # "sqlite" or "postgresql"
    driver: str  # "pysqlite" (default) or "aiosqlite"; "psycopg" for PostgreSQL
    path: Path | None  # the SQLite file; None for a server

    @property
    def shown(self) -> str:
        """The URL without its password, for messages and logs."""
        return hide_password(self.raw)

    def __repr__(self) -> str:
        return f"DatabaseURL({self.shown!r})"

    def scrub(self, text: str) -> str:
        """``text`` (a driver's message) with this URL's password replaced by ``***``."""
        return _without(text.replace(self.raw, self.shown), passwords(self.raw))

    def error(self, reason: object) -> DatabaseOpenError:
        """``cannot open database URL: REASON``, without the password in either."""
        return DatabaseOpenError(f"cannot open database {self.shown!r}: "
                                 f"{self.scrub(str(reason))}")

    def sync_url(self) -> str:
        if self.dialect == "postgresql":
            return "postgresql+psycopg://" + self.raw.partition("://")[2]
        return f"sqlite+pysqlite:///{self.path}"

    def async_url(self) -> str:
        return f"sqlite+aiosqlite:///{self.path}"


def resolve_url(url: str | os.PathLike[str] | None = None) -> DatabaseURL:
    """Parse ``url`` (or the environment's, see ``configured_url``, or the default) into a
    ``DatabaseURL``."""
    if url is None:
        url = configured_url() or f"sqlite:///{default_path()}"
    raw = os.fspath(url)
    if "://" not in raw:  # a bare filesystem path
        return DatabaseURL(raw, "sqlite", "pysqlite", Path(raw).expanduser())
    scheme, _, rest = raw.partition("://")
    dialect, _, driver = scheme.partition("+")
    if dialect in ("postgres", "postgresql"):
        if driver not in ("", "psycopg"):
            raise DatabaseOpenError(
                f"cannot open database {hide_password(raw)!r}: unsupported PostgreSQL driver "
                f"{driver!r}; use 'postgresql://...' (psycopg 3)")
        return DatabaseURL(raw, "postgresql", "psycopg", None)
    if dialect != "sqlite":
        raise DatabaseOpenError(
            f"cannot open database {hide_password(raw)!r}: unsupported scheme {scheme!r}; "
            "use 'sqlite:///PATH' or 'postgresql://USER@HOST/DATABASE'")
    if driver not in ("", "pysqlite", "aiosqlite"):
        raise DatabaseOpenError(
            f"cannot open database {hide_password(raw)!r}: unsupported SQLite driver "
            f"{driver!r}; use 'sqlite:///PATH' or 'sqlite+aiosqlite:///PATH'")
    # sqlite:///relative.db and sqlite:////abs/path.db, as SQLAlchemy reads them
    path = rest[1:] if rest.startswith("/") else rest
    path = path.split("?", 1)[0]
    if path in ("", ":memory:"):
        raise DatabaseOpenError(
            f"cannot open database {hide_password(raw)!r}: in-memory SQLite is not "
            "supported (each connection would see a different database); give a file path")
    return DatabaseURL(raw, "sqlite", driver or "pysqlite", Path(path).expanduser())
