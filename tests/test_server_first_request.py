"""A started server has its routes ready: a client's first calls do not pay for FastAPI
preparing the routes, which it otherwise does on the first request that walks past them
(half a second of CPU for this app, seconds on a loaded machine)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import routing

from test_server_support import Server, fake, script, server  # noqa: F401 (fixtures)


def test_the_first_requests_prepare_no_route(server: Server,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    prepared: list[str] = []
    real = routing.get_dependant

    def counted(*args: Any, **kwargs: Any) -> Any:
        prepared.append(kwargs.get("path", "?"))
        return real(*args, **kwargs)

    monkeypatch.setattr(routing, "get_dependant", counted)
    # The page is served by the last routers FastAPI tries; the others by the first and
    # the middle ones; a path nothing serves walks past every route.
    for path in ("/", "/v1/health", "/v1/agents/agent-none/memory/commits", "/nothing"):
        httpx.get(server.url + path, timeout=60)
    assert prepared == []
