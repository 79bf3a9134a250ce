"""``stateloop serve``: start the HTTP server, imported only when asked for."""

from __future__ import annotations

import inspect
import os
from typing import Any

from .console import err
from .exits import NOT_CONFIGURED, CliError, fail
from .provider import check_provider


def start_server(host: str | None, port: int | None, db: str | None) -> None:
    """Run the server until interrupted; a clear error if this install has none."""
    try:
        from ..server import serve
    except ImportError as exc:
        fail(f"the HTTP server is not available in this install ({exc})", NOT_CONFIGURED)
    parameters = inspect.signature(serve).parameters
    options: dict[str, Any] = {}
    default_model, base_url = "openai/gpt-4o-mini", None
    if "settings" in parameters:
        from ..server.settings import ServerSettings

        # --db already holds STATELOOP_DATABASE_URL when only the environment sets it.
        settings = ServerSettings(database_url=db)
        default_model, base_url = settings.default_model, settings.model_base_url
        options["settings"] = settings
    elif "database_url" in parameters:
        options["database_url"] = db
    elif db:
        os.environ["STATELOOP_DATABASE_URL"] = db  # a server that reads only the environment
    try:  # the server starts anyway (agents may name other models); runs would fail
        check_provider(default_model, base_url, base_url_flag=None)
    except CliError as error:
        err.print(f"[yellow]warning:[/] {error.message}")
        for hint in error.hints:
            err.print(f"  {hint}")
    serve(host, port, **options)
