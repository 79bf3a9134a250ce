"""``stateloop serve`` and ``up``: the server's settings checked, its port bound, then served.
Imported only when asked for."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pydantic import ValidationError
from rich.markup import escape

from ..errors import ConfigError
from ..server import bind as bind_socket
from ..server import serve
from ..server.exposure import EVERYWHERE, check_exposure
from ..server.exposure import client_url as url
from ..server.settings import ServerSettings
from ..store import open_store
from ..store.url import configured_url
from .console import err
from .exits import NOT_CONFIGURED, USAGE, CliError, fail
from .local import check_database_dir, holding_server
from .provider import check_provider

if TYPE_CHECKING:
    import socket

    from pydantic_core import ErrorDetails

def server_settings(host: str | None, port: int | None, db: str | None, *, insecure: bool,
                    model: str | None = None, base_url: str | None = None) -> ServerSettings:
    """The settings the server will run with (flags over ``STATELOOP_*`` variables), checked
    before anything starts: a misset variable, or a bind off loopback without
    authentication, is one line and an exit code."""
    try:
        # --db already holds STATELOOP_DATABASE_URL when only the environment sets it.
        settings = ServerSettings(database_url=db)
    except ValidationError as exc:
        fail("; ".join(_problem(error) for error in exc.errors()), USAGE)
    settings.host = host or settings.host
    settings.port = port or settings.port
    settings.default_model = model or settings.default_model
    settings.model_base_url = base_url or settings.model_base_url
    settings.database_url = settings.database_url or configured_url()
    if settings.database_url:
        check_database_dir(settings.database_url)
    held = holding_server(settings.database_url)
    if held:
        fail(f"the stateloop server at {held} already has this database open: talk to it "
             f"(`stateloop chat NAME --server {held}`, or its web page), or stop it first; "
             "two servers on one SQLite file would fork agents' histories", USAGE)
    if not insecure:
        try:
            check_exposure(settings.host, settings)
        except ConfigError as exc:
            fail(str(exc), NOT_CONFIGURED)
    return settings


def check_database(settings: ServerSettings) -> None:
    """Open the database (migrating it) and close it again: a wrong URL, password or role is
    one line and exit code 3 before the server starts, not its startup traceback."""
    async def check() -> None:
        await (await open_store(settings.database_url)).close()

    asyncio.run(check())


def client_url(settings: ServerSettings) -> str:
    """The URL a client on this machine uses to reach the server."""
    return url(settings.host, settings.port)


def listens_everywhere(settings: ServerSettings) -> bool:
    return settings.host in EVERYWHERE


def bind(settings: ServerSettings) -> socket.socket:
    """The server's socket, bound now: a port in use is an error before anything else."""
    return bind_socket(settings.host, settings.port)


def provider_ready(settings: ServerSettings, model: str) -> bool:
    """Whether ``model`` has a provider the server can call; if not, a warning saying what to
    set (the server starts anyway: agents may name other models)."""
    try:
        check_provider(model, settings.model_base_url)
    except CliError as error:
        err.print(f"[yellow]warning:[/] {escape(error.message)}")
        for hint in error.hints:
            err.print(f"  {escape(hint)}")
        return False
    return True


def start_server(settings: ServerSettings, sock: socket.socket) -> None:
    """Run the server on ``sock`` until interrupted, after printing the web page's address."""
    err.print(f"web page: {escape(client_url(settings))}/  (agents, memory, context, runs)")
    serve(settings.host, settings.port, settings=settings, insecure=True,  # checked already
          sock=sock)


def _problem(error: ErrorDetails) -> str:
    """One validation error as a line naming its variable (our own messages name theirs)."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if message.startswith("STATELOOP_"):
        return message
    field = ".".join(str(part) for part in error["loc"])
    return f"STATELOOP_{field.upper()}: {message}"
