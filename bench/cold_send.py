"""A send to an agent that is not live in the server (cold: it loads from the store first) and
to one that is (warm), on SQLite and on PostgreSQL: p50 of each, and the statements and
transactions each one runs (counted on the store's engine, so the figures do not depend on
how busy the machine is).

The server runs in this process under uvicorn on a loopback port, the fake OpenAI server as
its model; the client is letta-client, keep-alive. PostgreSQL is a throwaway pgserver.

    .venv/bin/python bench/cold_send.py [--agents 30] [--store sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from letta_client import Letta
from sqlalchemy import event

from stateloop.server import bind, create_app
from stateloop.server.settings import ServerSettings
from stateloop.testing import reply
from stateloop.testing.fake_openai import FakeOpenAI


@contextmanager
def postgresql() -> Iterator[str]:
    import pgserver

    server = pgserver.get_server(tempfile.mkdtemp(prefix="stateloop-cold-"),
                                 cleanup_mode="delete")
    try:
        server.psql("CREATE DATABASE cold")
        yield server.get_uri("cold")
    finally:
        server.cleanup()


@contextmanager
def serving(url: str, fake: FakeOpenAI) -> Iterator[tuple[str, Any]]:
    """The app on ``url``'s store under uvicorn in a thread: its URL and its runtime."""
    settings = ServerSettings(database_url=url, model_base_url=fake.base_url,
                              model_api_key="test")
    sock = bind("127.0.0.1", 0)
    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", app.state.runtime
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


class Counter:
    """Statements and transactions the store's engine runs while ``counting``."""

    def __init__(self, engine: Any) -> None:
        self.statements = self.transactions = 0
        self.on = False
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "begin", self._begin)

    def _statement(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.on and statement not in ("BEGIN", "BEGIN IMMEDIATE", "COMMIT"):
            self.statements += 1

    def _begin(self, conn: Any) -> None:
        self.transactions += self.on

    @contextmanager
    def counting(self) -> Iterator[None]:
        self.on = True
        try:
            yield
        finally:
            self.on = False


def timed(sends: list[Callable[[], Any]], counter: Counter) -> tuple[float, float, float]:
    """p50 ms, statements and transactions a send."""
    times = []
    with counter.counting():
        for send in sends:
            started = time.perf_counter()
            send()
            times.append(time.perf_counter() - started)
    count = len(sends)
    return (statistics.median(times) * 1000, counter.statements / count,
            counter.transactions / count)


def measure(label: str, url: str, agents: int) -> None:
    with FakeOpenAI(lambda request: reply("ok")) as fake, serving(url, fake) as (base, runtime):
        client = Letta(base_url=base, api_key="x")
        ids = [client.agents.create(
            model="openai/gpt-4o-mini", include_base_tools=True,
            memory_blocks=[{"label": "human", "value": "x"}, {"label": "persona", "value": "y"}]
        ).id for _ in range(agents)]
        say = [{"role": "user", "content": "hello"}]
        for agent_id in ids:  # each has a run and messages in context
            client.agents.messages.create(agent_id, messages=say)
        for agent_id in ids:
            runtime.forget(agent_id)

        def send(agent_id: str) -> Callable[[], Any]:
            return lambda: client.agents.messages.create(agent_id, messages=say)

        counter = Counter(runtime.store._runner.engine)
        cold = timed([send(agent_id) for agent_id in ids], counter)
        counter.statements = counter.transactions = 0
        warm = timed([send(agent_id) for agent_id in ids], counter)
        print(f"{label:<11} cold {cold[0]:6.1f} ms p50 ({cold[1]:4.1f} statements, "
              f"{cold[2]:3.1f} transactions)   warm {warm[0]:6.1f} ms p50 ({warm[1]:4.1f} "
              f"statements, {warm[2]:3.1f} transactions)   cold - warm {cold[0] - warm[0]:5.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=30)
    parser.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    if args.store in ("sqlite", "both"):
        measure("SQLite", f"sqlite:///{Path(tempfile.mkdtemp()) / 'cold.db'}", args.agents)
    if args.store in ("postgresql", "both"):
        with postgresql() as url:
            measure("PostgreSQL", url, args.agents)
