"""``stateloop serve``: start the HTTP server, imported only when asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .console import err
from .exits import NOT_CONFIGURED, USAGE, CliError, fail
from .provider import check_provider

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

    from ..server.settings import ServerSettings


def server_settings(host: str | None, db: str | None, *, insecure: bool) -> ServerSettings:
    """The settings the server will run with, checked before anything starts: a misset
    variable, or a bind off loopback without authentication, is one line and an exit code."""
    try:
        from pydantic import ValidationError

        from ..errors import ConfigError
        from ..server.exposure import check_exposure
        from ..server.settings import ServerSettings
    except ImportError as exc:
        fail(f"the HTTP server is not available in this install ({exc})", NOT_CONFIGURED)
    try:
        # --db already holds STATELOOP_DATABASE_URL when only the environment sets it.
        settings = ServerSettings(database_url=db)
    except ValidationError as exc:
        fail("; ".join(_problem(error) for error in exc.errors()), USAGE)
    if not insecure:
        try:
            check_exposure(host or settings.host, settings)
        except ConfigError as exc:
            fail(str(exc), NOT_CONFIGURED)
    return settings


def start_server(host: str | None, port: int | None, settings: ServerSettings) -> None:
    """Run the server until interrupted (``settings`` from ``server_settings``)."""
    from ..server import serve

    try:  # the server starts anyway (agents may name other models); runs would fail
        check_provider(settings.default_model, settings.model_base_url, base_url_flag=None)
    except CliError as error:
        err.print(f"[yellow]warning:[/] {error.message}")
        for hint in error.hints:
            err.print(f"  {hint}")
    serve(host, port, settings=settings, insecure=True)  # exposure was checked already


def _problem(error: ErrorDetails) -> str:
    """One validation error as a line naming its variable (our own messages name theirs)."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if message.startswith("STATELOOP_"):
        return message
    field = ".".join(str(part) for part in error["loc"])
    return f"STATELOOP_{field.upper()}: {message}"
