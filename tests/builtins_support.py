"""What the tests of Letta's built-in tools share: a loopback web site that records what
reaches it (and its ``site`` fixture), and one tool call made by the scripted model through
the server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from letta_client import Letta

from stateloop.testing.scripted import call, reply
from test_server_support import Script, new_agent


class Site:
    """A threaded HTTP server on a loopback address; ``routes`` maps a path to a function of
    the request giving (status, headers, body); every request is recorded."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.routes: dict[str, Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]]]
        self.routes = {}
        self.requests: list[dict[str, Any]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                path, _, query = self.path.partition("?")
                request = {"method": self.command, "path": path, "query": query,
                           "headers": {k.lower(): v for k, v in self.headers.items()},
                           "body": self.rfile.read(length) if length else b""}
                site.requests.append(request)
                route = site.routes.get(path)
                status, headers, body = route(request) if route else (404, {}, b"no")
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass  # the client stopped reading (a size cap)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Site:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def json_answer(payload: Any) -> Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]]:
    return lambda request: (200, {"content-type": "application/json"},
                            json.dumps(payload).encode())


def html_answer(html: str) -> Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]]:
    return lambda request: (200, {"content-type": "text/html; charset=utf-8"}, html.encode())


def redirect_to(url: str) -> Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]]:
    return lambda request: (302, {"location": url}, b"")


@pytest.fixture
def site() -> Iterator[Site]:
    with Site() as running:
        yield running


def call_tool(client: Letta, script: Script, tool: str, **arguments: Any) -> Any:
    """The tool_return_message of one call of ``tool`` by the scripted model, through the
    server; the model is shown the same text in its next request."""
    agent = new_agent(client, tools=[tool])
    script.set(call(tool, **arguments), reply("done"))
    response = client.agents.messages.create(agent.id, input="go")
    returns = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert len(returns) == 1, response.messages
    seen = [m for m in script.requests[-1].messages if m.role == "tool"]
    assert seen and seen[-1].text == returns[0].tool_return
    return returns[0]
