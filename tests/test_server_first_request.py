"""A started server is ready: a client's first calls pay neither for FastAPI preparing the
routes (on the first request that walks past them) nor for loading the token counter's
tables (at the first agent's creation), each half a second of CPU, seconds on a loaded
machine."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import routing
from letta_client import Letta

from patience import ANSWERS
from stateloop.llm import tokens
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, fake, script, server, settings_for  # noqa: F401 (fixtures)


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


def test_the_token_tables_load_at_start_off_the_event_loop(
        fake: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first exact token count (at an agent's creation) loads tiktoken's tables, 0.5 s
    of CPU: in a worker thread as the server starts, not on the loop in a client's call."""
    loaded_in: list[str] = []
    load = tokens._load_encoding.__wrapped__

    @functools.cache
    def recorded(name: str) -> Any:
        loaded_in.append(threading.current_thread().name)
        return load(name)

    monkeypatch.setattr(tokens, "_load_encoding", recorded)
    with Server(settings_for(fake, tmp_path / "stateloop.db")) as started:
        deadline = time.monotonic() + ANSWERS
        while not loaded_in and time.monotonic() < deadline:  # the start's load, if any
            time.sleep(0.01)
        client = Letta(base_url=started.url, api_key="unused", max_retries=0, timeout=ANSWERS)
        client.agents.create(model="openai/gpt-4o-mini", name="counted",
                             memory_blocks=[{"label": "human", "value": "Ada"}])
        serving = started.thread.name
    assert loaded_in and serving not in loaded_in, (serving, loaded_in)
