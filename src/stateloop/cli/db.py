"""``stateloop migrate``: bring a database's schema up to this stateloop's newest revision.

Every store also migrates when it opens (processes starting together take turns under a
PostgreSQL advisory lock); the command is what a deploy runs once, before it starts or rolls
its server processes, so a failing migration stops the deploy instead of every process."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from ..store import open_store
from ..store.url import DatabaseURL, resolve_url
from .console import err, out
from .exits import handled
from .local import database_url
from .options import DB_HELP, warn_on_password

Database = Annotated[str | None, typer.Option(
    "--db", "--database", envvar="STATELOOP_DATABASE_URL", show_default=False,
    callback=warn_on_password, help=DB_HELP)]


@handled
def migrate(db: Database = None) -> None:
    """Upgrade the database to the newest schema and print its revision."""
    from ..store.migrate import HEAD  # lazy: Alembic and SQLAlchemy cost 0.15 s

    url = resolve_url(database_url(db))  # else the environment's; a missing directory: exit 2
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
    from sqlalchemy import create_engine  # lazy: SQLAlchemy costs 0.15 s; only migrate uses it
    from sqlalchemy.exc import ArgumentError, DBAPIError  # lazy: as above

    from ..store.migrate import current_revision  # lazy: as above

    if url.path is not None and not url.path.exists():
        return None
    try:
        engine = create_engine(url.sync_url())
    except (ArgumentError, ValueError) as exc:  # a port that is not a number, ...
        raise url.error(exc) from None
    try:
        with engine.connect() as conn:
            return current_revision(conn)
    except DBAPIError as exc:  # the driver's chain may quote the URL: deploy logs show it
        raise url.error(exc.orig) from None
    finally:
        engine.dispose()
