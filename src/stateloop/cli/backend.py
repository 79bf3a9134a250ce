"""Local database or server: the one choice every command makes first."""

from __future__ import annotations

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
                check: bool = True) -> Session: ...
    def close(self) -> None: ...


def open_backend(db: str | None, server: str | None, token: str | None = None) -> Backend:
    """The server at ``server`` if given, else the database ``db`` (or the default one)."""
    if server:
        from .remote import RemoteBackend

        return RemoteBackend(server, token)
    from .local import LocalBackend

    return LocalBackend(db)
