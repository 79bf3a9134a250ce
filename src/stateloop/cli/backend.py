"""Local database or server: the one choice every command makes first."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from rich.markup import escape

from .console import err
from .items import Session
from .local import LocalBackend, database_url, holding_server
from .spec import AgentSpec


class Backend(Protocol):
    """Where agents live: the local database (``LocalBackend``) or a server."""

    @property
    def server_url(self) -> str | None:
        """The server's URL; None for the local database."""
        ...

    def list_agents(self, tags: list[str], *, limit: int,
                    after: str | None = None) -> list[dict[str, Any]]: ...
    def show_agent(self, name: str) -> dict[str, Any]: ...
    def create_agent(self, spec: AgentSpec) -> dict[str, Any]: ...
    def delete_agent(self, name: str) -> dict[str, Any]: ...
    def session(self, name: str, *, model: str | None = None, base_url: str | None = None,
                context_window: int | None = None, check: bool = True) -> Session: ...
    def close(self) -> None: ...


@contextmanager
def open_backend(db: str | None, server: str | None,
                 token: str | None = None) -> Iterator[Backend]:
    """The server at ``server`` if given, else the database ``db`` (or the default one) or,
    when a stateloop server holds that database, that server; closed when the block ends."""
    backend: Backend
    if not server:
        url = database_url(db)
        server = holding_server(url)
        if server:
            err.print(f"note: the stateloop server at {escape(server)} has this database open: "
                      "talking to it (as with --server)")
    if server:
        from .remote import RemoteBackend  # lazy: httpx costs 0.05 s; only server mode uses it

        backend = RemoteBackend(server, token)
    else:
        backend = LocalBackend(db)
    try:
        yield backend
    finally:
        backend.close()
