"""``callback_url`` on ``POST .../messages/async`` through letta-client: Letta's payload is
POSTed to a loopback receiver once the run ends, the run records what came of it, a slow,
failing or redirecting callback neither holds nor fails the run, and a URL the operator did
not allow is a 422 before anything runs."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from letta_spec import assert_letta_shape
from stateloop.server import bind
from stateloop.testing import reply
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, client, fake, new_agent, script, server, settings_for  # noqa: F401 (fixtures)


class Receiver:
    """A loopback HTTP server keeping what is POSTed to it: ``/ok`` answers 200, ``/fail``
    500, ``/redirect`` a 307 to ``/ok?redirected``, ``/slow`` waits for ``release``."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.arrived = threading.Event()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                receiver.posts.append((self.path, body))
                receiver.arrived.set()
                if self.path == "/slow":
                    receiver.release.wait(30)
                if self.path == "/redirect":
                    self.send_response(307)
                    self.send_header("Location", "/ok?redirected")
                else:
                    self.send_response(500 if self.path == "/fail" else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture(scope="module")
def open_server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose operator lets callbacks reach loopback, with a 5 s bound: room for a
    loaded machine's answer, and short enough to wait out for the slow receiver."""
    db: Path = tmp_path_factory.mktemp("callbacks") / "stateloop.db"
    with Server(settings_for(fake, db, callback_private_urls=True,
                             callback_timeout=5.0)) as running:
        yield running


@pytest.fixture
def local(open_server: Server, script: Script) -> Letta:
    script.set()
    return Letta(base_url=open_server.url, api_key="unused", max_retries=0, timeout=30)


def until(check: Callable[[], Any], what: str, limit: float = 20.0) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def recorded(client: Letta, run_id: str) -> Any:
    """The run, once its callback's outcome is recorded."""
    return until(lambda: (run := client.runs.retrieve(run_id)).callback_sent_at and run,
                 "the callback's outcome recorded on the run")


def test_the_callback_gets_letta_s_payload_and_the_run_records_it(
        local: Letta, script: Script, receiver: Receiver) -> None:
    script.set(reply("Hello from the run."))
    agent = new_agent(local)
    started = local.agents.messages.create_async(agent.id, input="hi",
                                                 callback_url=f"{receiver.url}/ok")
    assert started.callback_url == f"{receiver.url}/ok"
    run = recorded(local, started.id)
    assert (run.status, run.callback_status_code, run.callback_error) == ("completed", 200,
                                                                          None)
    assert_letta_shape("/v1/runs/{run_id}", "get", run.model_dump(mode="json"))
    [(path, payload)] = [(p, b) for p, b in receiver.posts if b["run_id"] == started.id]
    assert path == "/ok"
    assert set(payload) == {"run_id", "status", "completed_at", "metadata"}
    assert payload["status"] == "completed" and payload["completed_at"]
    result = payload["metadata"]["result"]
    assert result["stop_reason"]["stop_reason"] == "end_turn"
    assert result["usage"]["message_type"] == "usage_statistics"
    assert [m["content"] for m in result["messages"]
            if m["message_type"] == "assistant_message"] == ["Hello from the run."]
    assert "callback" not in (run.metadata or {})  # shown in the callback_* fields only


def test_a_slow_callback_holds_neither_the_run_nor_the_agent(
        local: Letta, script: Script, receiver: Receiver) -> None:
    receiver.arrived.clear()
    script.set(reply("first"), reply("second"))
    agent = new_agent(local)
    started = local.agents.messages.create_async(agent.id, input="hi",
                                                 callback_url=f"{receiver.url}/slow")
    until(receiver.arrived.is_set, "the callback arriving")
    # the receiver holds it: the run has ended all the same, and the agent answers again
    assert local.runs.retrieve(started.id).status == "completed"
    answer = local.agents.messages.create(agent.id, input="again")
    assert answer.messages[-1].content == "second"
    run = recorded(local, started.id)
    assert run.status == "completed" and run.callback_status_code is None
    assert "no answer within 5 s" in run.callback_error
    receiver.release.set()


def test_failing_and_redirecting_callbacks_are_recorded_and_redirects_not_followed(
        local: Letta, script: Script, receiver: Receiver) -> None:
    closed = bind("127.0.0.1", 0)
    nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}/gone"
    closed.close()  # nothing listens there now
    agent = new_agent(local)
    outcomes = {}
    for url in (f"{receiver.url}/fail", f"{receiver.url}/redirect", nowhere):
        script.set(reply("ok"))
        started = local.agents.messages.create_async(agent.id, input="hi", callback_url=url)
        run = recorded(local, started.id)
        assert run.status == "completed"
        outcomes[url.rsplit("/", 1)[1]] = (run.callback_status_code, run.callback_error)
    assert outcomes["fail"] == (500, None)
    assert outcomes["redirect"] == (307, None)
    assert not [p for p, _ in receiver.posts if "redirected" in p]  # not followed
    code, error = outcomes["gone"]
    assert code is None and error.startswith("Failed to dispatch callback for run")


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/hook", "http://localhost/hook",
                                 "http://10.0.0.7/hook", "http://[::1]:8080/hook",
                                 "http://169.254.169.254/latest/meta-data"])
def test_a_callback_to_a_private_address_is_refused_unless_the_operator_allows_it(
        client: Letta, url: str) -> None:
    agent = new_agent(client)
    with pytest.raises(letta_client.UnprocessableEntityError) as refused:
        client.agents.messages.create_async(agent.id, input="hi", callback_url=url)
    said = str(refused.value)
    assert "callback_url" in said and "STATELOOP_CALLBACK_PRIVATE_URLS" in said
    assert list(client.runs.list(agent_id=agent.id)) == []  # nothing ran


@pytest.mark.parametrize("url", ["ftp://example.com/hook", "file:///etc/passwd",
                                 "http:///nohost", "not a url"])
def test_a_callback_url_that_is_not_http_is_refused(client: Letta, url: str) -> None:
    agent = new_agent(client)
    with pytest.raises(letta_client.UnprocessableEntityError) as refused:
        client.agents.messages.create_async(agent.id, input="hi", callback_url=url)
    assert "callback_url must be an http:// or https:// URL" in str(refused.value)
    assert list(client.runs.list(agent_id=agent.id)) == []
