"""Shared harness for the server tests: the app under uvicorn on a loopback port (real
sockets), the fake OpenAI server as every agent's model, a tmp SQLite file, letta-client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from letta_client import Letta

from fake_script import Script
from patience import STARTS, STOPS
from stateloop.server import bind, create_app
from stateloop.server.settings import ServerSettings
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.tools import Tool


class Server:
    """uvicorn serving ``create_app(settings)`` in a thread, on a socket bound here."""

    def __init__(self, settings: ServerSettings, tools: tuple[Tool, ...] = ()) -> None:
        self.socket = bind("127.0.0.1", 0)  # as `stateloop serve` binds (TCP_NODELAY)
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(create_app(settings, tools=tools), log_level="warning",
                                lifespan="on", timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run,
                                       kwargs={"sockets": [self.socket]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.time() + STARTS
        while not self.server.started:
            if time.time() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=STOPS)
        self.socket.close()


def settings_for(fake: FakeOpenAI, db: Path, **overrides: Any) -> ServerSettings:
    """Settings for a test server: this database, the fake as model and embedder."""
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{db}", "model_base_url": fake.base_url,
        "model_api_key": "test", "embedding": "openai/text-embedding-3-small",
        "tool_timeout": 6.0, "tool_memory_mb": 256, "ping_interval": 0.2}
    values.update(overrides)
    return ServerSettings(**values)


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def fake(script: Script) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(script, chunk_size=4) as server:
        yield server


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("server") / "stateloop.db"
    with Server(settings_for(fake, db)) as running:
        yield running


@pytest.fixture
def client(server: Server, script: Script) -> Letta:
    script.set()
    return Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)


def new_agent(client: Letta, **options: Any) -> Any:
    """An agent with a human block and no base tools unless asked."""
    options.setdefault("model", "openai/gpt-4o-mini")
    options.setdefault("memory_blocks", [{"label": "human", "value": "Name: Ada"}])
    options.setdefault("include_base_tools", False)
    return client.agents.create(**options)
