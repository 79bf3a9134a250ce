"""Two ``stateloop serve`` processes on one PostgreSQL, driven by letta-client: a run in
flight on one is cancelled or steered through the other; an agent edited through one is seen
by the other; a process killed mid-run leaves its run failed and the agent usable; a provider
added over REST on one serves an agent on the other, its key sealed in the database."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from letta_client import Letta

from patience import ANSWERS, STOPS
from stateloop.testing.scripted import call, reply
from test_cli_support import Cli, Script, cli, console_script, fake, free_port, script, serving  # noqa: F401 (fixtures)


def held(release: threading.Event, item: Any) -> Callable[[Any], Any]:
    """A model call that answers ``item`` once ``release`` is set (30 s at most)."""
    def wait(request: Any) -> Any:
        release.wait(30)
        return item

    return wait


def until(check: Callable[[], Any], what: str, timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def new_agent(client: Letta) -> str:
    return client.agents.create(model="openai/gpt-4o-mini", include_base_tools=True,
                                memory_blocks=[{"label": "human", "value": "?"}]).id


@contextmanager
def two_processes(cli: Cli, pg_database: Callable[..., str]
                  ) -> Iterator[tuple[Letta, Letta]]:
    """Clients of two ``stateloop serve`` processes on a new PostgreSQL database."""
    cli.env["STATELOOP_DATABASE_URL"] = pg_database()
    with serving(cli) as first, serving(cli) as second:
        yield Letta(base_url=first, api_key="x"), Letta(base_url=second, api_key="x")


def url(client: Letta) -> str:
    return str(client.base_url).rstrip("/")


def test_cancel_sent_to_one_process_stops_the_run_in_another(
        cli: Cli, script: Script, pg_database: Callable[..., str]) -> None:
    release = threading.Event()
    with two_processes(cli, pg_database) as (one, two):
        agent = new_agent(one)
        script.set(held(release, reply("too late")))
        try:
            run = one.agents.messages.create_async(agent, input="take your time")
            until(lambda: len(script.requests) == 1, "the model is called")
            cancelled = two.agents.messages.cancel(agent)
            assert cancelled in ({}, {run.id: "cancelled"})  # its row may not be written yet
            status = until(lambda: two.runs.retrieve(run.id).status != "running" and
                           two.runs.retrieve(run.id), "the run ends")
            assert (status.status, status.stop_reason) == ("cancelled", "cancelled")
        finally:
            release.set()
        script.set(reply("here again"))  # the agent takes the next message, on either side
        answer = two.agents.messages.create(agent, input="still there?")
        assert answer.messages[-1].content == "here again"


def test_steering_sent_to_one_process_reaches_the_run_in_another(
        cli: Cli, script: Script, pg_database: Callable[..., str]) -> None:
    release = threading.Event()
    with two_processes(cli, pg_database) as (one, two):
        agent = new_agent(one)
        script.set(held(release, call("archival_memory_search", query="maps")),
                   lambda request: reply(" / ".join(m.text for m in request.messages
                                                    if m.role == "user")))
        try:
            run = one.agents.messages.create_async(agent, input="find the way")
            until(lambda: len(script.requests) == 1, "the model is called")
            delivered = httpx.post(f"{url(two)}/v1/agents/{agent}/messages/steer",
                                   json={"content": "turn left"}, timeout=ANSWERS)
            assert delivered.status_code == 202, delivered.text
            assert delivered.json()["status"] == "delivered"
            time.sleep(0.3)  # the word reaches the other process before the model answers
        finally:
            release.set()
        until(lambda: two.runs.retrieve(run.id).status == "completed", "the run completes")
        user_texts = [m.text for m in script.requests[1].messages if m.role == "user"]
        assert user_texts[-1] == "turn left"  # before the second model call, in the same run
        assert script.requests[1].messages[-1].text == "turn left"


def test_an_edit_through_one_process_is_seen_by_the_next_run_on_the_other(
        cli: Cli, script: Script, pg_database: Callable[..., str]) -> None:
    with two_processes(cli, pg_database) as (one, two):
        agent = new_agent(one)
        script.set(reply("one"), reply("two"), reply("three"))
        one.agents.messages.create(agent, input="hello from one")  # live in the first
        two.agents.messages.create(agent, input="hello from two")  # and in the second
        one.agents.update(agent, system="You are a lighthouse keeper.")
        one.agents.blocks.update("human", agent_id=agent, value="Name: Ada")
        two.agents.messages.create(agent, input="who are you?")
        system = script.requests[2].messages[0].text
        assert "lighthouse keeper" in system and "Name: Ada" in system
        texts = [m.text for m in script.requests[2].messages if m.role == "user"]
        assert texts == ["hello from one", "hello from two", "who are you?"]


@contextmanager
def process(cli: Cli, port: int) -> Iterator[subprocess.Popen[str]]:
    """``stateloop serve`` on ``port``, not stopped on exit if already dead."""
    child = subprocess.Popen([*console_script(), "serve", "--port", str(port)],
                             env=cli.environment(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        until(lambda: _healthy(port), "the server comes up", timeout=30)
        yield child
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(STOPS)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_process_killed_mid_run_leaves_its_run_failed_and_the_agent_usable(
        cli: Cli, script: Script, pg_database: Callable[..., str]) -> None:
    cli.env["STATELOOP_DATABASE_URL"] = pg_database()
    release = threading.Event()
    port = free_port()
    with serving(cli) as survivor, process(cli, port) as doomed:
        two = Letta(base_url=survivor, api_key="x")
        one = Letta(base_url=f"http://127.0.0.1:{port}", api_key="x")
        agent = new_agent(two)
        script.set(reply("first"), call("archival_memory_search", query="x"),
                   held(release, reply("never heard")))
        two.agents.messages.create(agent, input="first")
        try:
            run = one.agents.messages.create_async(agent, input="second")
            until(lambda: len(script.requests) == 3, "the run calls the model again")
            doomed.kill()  # SIGKILL, between a tool's result and the next model call
            doomed.wait()
            ended = until(lambda: two.runs.retrieve(run.id).status != "running" and
                          two.runs.retrieve(run.id), "the dead process's run ends", 10)
        finally:
            release.set()
        assert (ended.status, ended.stop_reason) == ("failed", "error")
        script.set(reply("still here"))
        answer = two.agents.messages.create(agent, input="third")
        assert answer.messages[-1].content == "still here"
        history = [(m.message_type, getattr(m, "content", None))
                   for m in two.agents.messages.list(agent, order="asc", limit=100)]
        user = [content for kind, content in history if kind == "user_message"]
        assert user == ["first", "second", "third"]  # each stored once, in order
        calls = [kind for kind, _ in history if kind in ("tool_call_message",
                                                          "tool_return_message")]
        assert calls == ["tool_call_message", "tool_return_message"]  # answered once


def test_a_conversations_run_is_streamed_again_by_the_other_process(
        cli: Cli, script: Script, pg_database: Callable[..., str]) -> None:
    with two_processes(cli, pg_database) as (one, two):
        agent = new_agent(one)
        conversation = one.conversations.create(agent_id=agent).id
        script.set(reply("you said hello"))
        frames = list(one.conversations.messages.create(conversation, input="hello",
                                                        include_pings=False))
        assert frames[-2].message_type == "stop_reason"
        # a finished run is streamed again by its id (without one: only a run in flight)
        [run_id] = {getattr(frame, "run_id", None) for frame in frames} - {None}
        replay = httpx.post(f"{url(two)}/v1/conversations/{conversation}/stream",
                            json={"run_id": run_id}, timeout=ANSWERS)
        assert replay.status_code == 200, replay.text
        data = [line[6:] for line in replay.text.splitlines() if line.startswith("data: ")]
        assert '"you said hello"' in replay.text and data[-1] == "[DONE]"


def test_a_provider_added_on_one_process_serves_an_agent_on_the_other(
        cli: Cli, script: Script, fake: Any, pg_database: Callable[..., str]) -> None:
    import psycopg
    from cryptography.fernet import Fernet

    cli.env["STATELOOP_ENCRYPTION_KEY"] = Fernet.generate_key().decode()
    cli.env["STATELOOP_PROVIDER_PRIVATE_URLS"] = "1"  # the fake provider is on loopback
    with two_processes(cli, pg_database) as (one, two):
        added = httpx.post(f"{url(one)}/v1/providers", timeout=ANSWERS, json={
            "name": "crew", "provider_type": "together", "api_key": "sk-fleet-93c1",
            "base_url": fake.base_url})
        assert added.status_code == 200, added.text
        agent = two.agents.create(model="crew/fake-model", embedding="crew/fake-embed",
                                  include_base_tools=False).id
        script.set(reply("through the crew's key"))
        seen = len(fake.requests)
        answer = two.agents.messages.create(agent, input="hello")
        assert answer.messages[-1].content == "through the crew's key"
        call_ = next(r for r in fake.requests[seen:] if r.path.endswith("/chat/completions"))
        assert call_.headers["authorization"] == "Bearer sk-fleet-93c1"
        seen = len(fake.requests)
        one.agents.passages.create(agent, text="Embedded with the crew's key.")
        embedded = next(r for r in fake.requests[seen:] if r.path.endswith("/embeddings"))
        assert (embedded.body["model"], embedded.headers["authorization"]) == (
            "fake-embed", "Bearer sk-fleet-93c1")
        with psycopg.connect(cli.env["STATELOOP_DATABASE_URL"]) as conn:
            row = conn.execute("SELECT * FROM providers").fetchone()
        assert row is not None and "sk-fleet-93c1" not in repr(row)
        gone = httpx.delete(f"{url(one)}/v1/providers/{added.json()['id']}", timeout=ANSWERS)
        assert gone.status_code == 200
        failed = httpx.post(f"{url(two)}/v1/agents/{agent}/messages", timeout=ANSWERS,
                            json={"messages": [{"role": "user", "content": "again"}]})
        assert failed.status_code == 400
        assert "'crew/fake-model'" in failed.json()["detail"]
