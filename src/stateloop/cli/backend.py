"""Local database or server: the one choice every command makes first."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from .items import Session
from .spec import AgentSpec


class Backend(Protocol):
    """Where agents live: the local database (``LocalBackend``) or a server."""

    def list_agents(self, tags: list[str]) -> list[dict[str, Any]]: ...
    def show_agent(self, name: str) -> dict[str, Any]: ...
    def create_agent(self, spec: AgentSpec) -> dict[str, Any]: ...
    def delete_agent(self, name: str) -> dict[str, Any]: ...
    def session(self, name: str, *, model: str | None = None, base_url: str | None = None,
                context_window: int | None = None, check: bool = True) -> Session: ...
    def close(self) -> None: ...


@contextmanager
def open_backend(db: str | None, server: str | None,
                 token: str | None = None) -> Iterator[Backend]:
    """The server at ``server`` if given, else the database ``db`` (or the default one);
    closed when the block ends."""
    backend: Backend
    if server:
        from .remote import RemoteBackend

        backend = RemoteBackend(server, token)
    else:
        from .local import LocalBackend

        backend = LocalBackend(db)
    try:
        yield backend
    finally:
        backend.close()
