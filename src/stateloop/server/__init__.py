"""The HTTP server: Letta's REST API (``stateloop serve``). Imports FastAPI, so
``import stateloop`` never imports this package."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

    from .settings import ServerSettings

__all__ = ["create_app", "serve"]


def create_app(settings: ServerSettings | None = None, **options: Any) -> FastAPI:
    """The FastAPI app; see ``stateloop.server.app.create_app``."""
    from .app import create_app as build

    return build(settings, **options)


def serve(host: str | None = None, port: int | None = None, *,
          settings: ServerSettings | None = None) -> None:
    """Run the server until interrupted (``stateloop serve``); defaults 127.0.0.1:8283."""
    import uvicorn

    from .settings import ServerSettings

    config = settings or ServerSettings()
    uvicorn.run(create_app(config), host=host or config.host, port=port or config.port,
                log_level="info")
