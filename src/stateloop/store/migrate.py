"""Schema migrations, run on open: upgrade an older database, refuse a newer one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Connection, inspect, text

from stateloop.store.errors import DatabaseOpenError, SchemaTooNewError

HEAD = "0031"  # the newest revision in migrations/versions (a test keeps them in step)
MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def current_revision(conn: Connection) -> str | None:
    """The database's alembic revision, or None for a database stateloop never touched."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _alembic_config(conn: Connection) -> Any:
    from alembic.config import Config  # lazy: Alembic, for migrations only

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = conn
    return config


def known_revisions() -> list[str]:
    """Every revision this code ships, oldest first."""
    from alembic.script import ScriptDirectory  # lazy: Alembic, for migrations only

    script = ScriptDirectory(str(MIGRATIONS_DIR))
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def upgrade(conn: Connection, url: str, revision: str = "head") -> None:
    """Bring the database on ``conn`` to ``revision``; the caller owns the transaction."""
    if conn.dialect.name == "postgresql":  # processes starting together migrate one at a time
        conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7305218801)")
    current = current_revision(conn)
    if current == HEAD and revision in ("head", HEAD):
        return  # the common case stays free of alembic's import and script scan
    if current is None:
        others = [t for t in inspect(conn).get_table_names()
                  if not t.startswith("sqlite_") and t != "alembic_version"]
        if others:
            raise DatabaseOpenError(
                f"cannot open database {url!r}: it holds tables ({', '.join(others[:5])}) "
                "but is not a stateloop database")
    elif current not in known_revisions():
        raise SchemaTooNewError(
            f"database {url!r} has schema revision {current!r}, newer than this stateloop "
            f"(head {HEAD!r}); upgrade stateloop to open it. Nothing was changed.")
    from alembic import command  # lazy: Alembic, for migrations only

    command.upgrade(_alembic_config(conn), revision)
