"""The HTTP server: Letta's REST API (``stateloop serve``). Imports FastAPI, so
``import stateloop`` never imports this package."""

from __future__ import annotations

import errno
import gc
import socket
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..tracing import add_watcher
from .exposure import check_exposure, client_url, served_hosts
from .logs import RunLog, log_config
from .settings import ServerSettings
from .telemetry import configure_tracing

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["bind", "create_app", "serve"]


def create_app(settings: ServerSettings | None = None, **options: Any) -> FastAPI:
    """The FastAPI app; see ``stateloop.server.app.create_app``."""
    from .app import create_app as build  # lazy: FastAPI and the routes cost 1 s

    return build(settings, **options)


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready socket on ``host:port``; a ``ConfigError`` naming the port and how to
    choose another when it is taken (or the address is not this machine's)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only then,
    # and without it a keep-alive response written in two pieces waits ~40 ms for an ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is already in use (another stateloop server?): "
                "choose another with --port N or STATELOOP_PORT=N") from exc
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc} "
                          "(choose the address with --host or STATELOOP_HOST)") from exc
    return sock


def serve(host: str | None = None, port: int | None = None, *,
          settings: ServerSettings | None = None, insecure: bool = False,
          sock: socket.socket | None = None) -> None:
    """Run the server until interrupted (``stateloop serve``); defaults 127.0.0.1:8283.

    Off loopback it needs a password or API keys in ``settings``, unless ``insecure``: a
    ``ConfigError`` says so before anything binds. ``sock`` is one ``bind`` returned, for a
    caller that binds before it says where to connect. A request naming another ``Host``
    than the address bound (or ``allowed_hosts``) is refused: see ``served_hosts``."""
    import uvicorn  # lazy: 0.03 s; the CLI imports this package for more than serving
    from uvicorn.config import LOGGING_CONFIG  # lazy: as above

    config = settings or ServerSettings()
    where = host or config.host
    if not insecure:
        check_exposure(where, config)
    configure_tracing()  # as the OTEL_* environment asks; a ConfigError before binding
    if sock is None:
        sock = bind(where, port or config.port)
    # The server's own messages (what bounds its sandboxes, what is refused) go where
    # uvicorn's go, from INFO up; as JSON lines, with a line for each run's end, if asked.
    json_lines = config.log_format == "json"
    logs = log_config(LOGGING_CONFIG, json_lines)
    if json_lines:
        add_watcher(RunLog)
    bound = sock.getsockname()[1]
    config = config.model_copy(update={"allowed_hosts": served_hosts(where, bound, config)})
    app = create_app(config, address=client_url(where, bound))
    server = uvicorn.Server(uvicorn.Config(app, host=where, port=bound,
                                           log_level="info", log_config=logs))
    # What the imports and the routes made lives as long as the process: frozen, it is out of
    # the collector's reach, so its full passes do not walk it all again and again.
    gc.collect()
    gc.freeze()
    server.run(sockets=[sock])
