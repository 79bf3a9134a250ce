"""``stateloop migrate``: bring a database's schema up to this stateloop's newest revision.

Every store also migrates when it opens (processes starting together take turns under a
PostgreSQL advisory lock); the command is what a deploy runs once, before it starts or rolls
its server processes, so a failing migration stops the deploy instead of every process."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from ..store.url import DatabaseURL, resolve_url
from .console import err, out
from .exits import handled

Database = Annotated[str | None, typer.Option(
    "--db", "--database", envvar="STATELOOP_DATABASE_URL", show_default=False,
    help="The database: postgresql://USER:PASSWORD@HOST/DB, sqlite:///PATH or a file path "
         "\\[default: ~/.stateloop/stateloop.db].")]


@handled
def migrate(db: Database = None) -> None:
    """Upgrade the database to the newest schema and print its revision."""
    from ..store import open_store
    from ..store.migrate import HEAD

    url = resolve_url(db)
    before = revision(url)

    async def upgrade() -> None:
        await (await open_store(url.raw)).close()

    asyncio.run(upgrade())
    out.print(HEAD)
    if before == HEAD:
        err.print("the database was at the newest revision already")
    elif before is None:
        err.print("created the schema")
    else:
        err.print(f"upgraded from revision {before}")


def revision(url: DatabaseURL) -> str | None:
    """The database's schema revision; None for a database (or SQLite file) not made yet."""
    from sqlalchemy import create_engine, make_url
    from sqlalchemy.exc import DBAPIError

    from ..store.errors import DatabaseOpenError
    from ..store.migrate import current_revision

    if url.path is not None and not url.path.exists():
        return None
    engine = create_engine(url.sync_url())
    try:
        with engine.connect() as conn:
            return current_revision(conn)
    except DBAPIError as exc:
        shown = make_url(url.raw).render_as_string(hide_password=True)  # deploy logs
        raise DatabaseOpenError(f"cannot open database {shown!r}: {exc.orig}") from exc
    finally:
        engine.dispose()
