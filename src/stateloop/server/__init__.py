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
          settings: ServerSettings | None = None, insecure: bool = False) -> None:
    """Run the server until interrupted (``stateloop serve``); defaults 127.0.0.1:8283.

    Off loopback it needs a password or API keys in ``settings``, unless ``insecure``: a
    ``ConfigError`` says so before anything binds."""
    import uvicorn

    from .exposure import check_exposure
    from .settings import ServerSettings

    config = settings or ServerSettings()
    bind = host or config.host
    if not insecure:
        check_exposure(bind, config)
    uvicorn.run(create_app(config), host=bind, port=port or config.port, log_level="info")
