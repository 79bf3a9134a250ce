"""A fake model provider over real HTTP: OpenAI Chat Completions, Anthropic Messages, embeddings.

``FakeOpenAI`` plays a ``ScriptedModel`` script (``reply``, ``call``, ``calls``, ``error``, or a
function of the request) on a loopback port, streaming real SSE. Faults (429 with
Retry-After, 500, 529, context overflow, a malformed chunk, a dropped connection) can be
injected before script items; like the real services it rejects transcripts whose tool
calls and results do not pair up.

    with FakeOpenAI([call("add", a=1, b=2), reply("3")], faults=[rate_limited(0.01)]) as fake:
        agent = Agent(model="openai/gpt-4o-mini", base_url=fake.base_url, api_key="test")

Run it standalone with ``python -m stateloop.testing.fake_openai --port 8000``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from ..llm.base import ModelRequest
from ..llm.tokens import estimate_tokens
from ..messages import Usage
from . import _wire
from ._faults import (
    MESSAGES,
    STATUS_TYPES,
    Fault,
    context_overflow,
    dropped_connection,
    fault_for,
    http_error,
    malformed_chunk,
    overloaded,
    rate_limited,
    server_error,
)
from .scripted import Call, Calls, ErrorReply, Reply, ScriptItem, call, error, reply

__all__ = [
    "FakeItem", "FakeOpenAI", "FakeScript", "Fault", "Recorded", "RecordedRequest",
    "context_overflow", "dropped_connection", "http_error", "load_script", "main",
    "malformed_chunk", "overloaded", "rate_limited", "recorded", "server_error",
]

Flavor = Literal["openai", "anthropic"]


@dataclass(slots=True)
class Recorded:
    """A response replayed byte for byte, such as a provider's SSE stream saved to a file."""

    body: bytes
    status: int = 200
    content_type: str = "text/event-stream"


def recorded(source: str | bytes | os.PathLike[str], *, status: int = 200,
             content_type: str = "text/event-stream") -> Recorded:
    """A script item that replays ``source`` (bytes, or a file path) as the response."""
    body = source if isinstance(source, bytes) else Path(source).read_bytes()
    return Recorded(body, status, content_type)


FakeItem = ScriptItem | Recorded
FakeScript = Sequence[FakeItem] | Callable[[ModelRequest], FakeItem]


@dataclass(slots=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any] = field(default_factory=dict)


class FakeOpenAI:
    """An in-process HTTP server on a free loopback port that plays ``script``.

    ``base_url`` is for OpenAI-style clients (it ends in ``/v1``); ``url`` for the Anthropic
    SDK, which adds ``/v1`` itself. ``faults`` are served one per model request, before the
    script moves on (``None`` serves the script normally). Every request lands in ``requests``.
    """

    def __init__(self, script: FakeScript = (), *, latency: float = 0.0, chunk_delay: float = 0.0,
                 chunk_size: int = 8, faults: Iterable[Fault | ErrorReply | None] = (),
                 api_key: str | None = None, embedding_dimensions: int = 64,
                 reject_roles: Sequence[str] = (), reject_fields: Sequence[str] = (),
                 context_window: int | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.latency = latency
        self.chunk_delay = chunk_delay
        self.chunk_size = chunk_size
        self.api_key = api_key
        self.embedding_dimensions = embedding_dimensions
        self.reject_roles = set(reject_roles)
        self.reject_fields = set(reject_fields)
        self.context_window = context_window  # prompts over it get the overflow error
        self.overflows = 0  # how many requests were refused for being too long
        self.requests: list[RecordedRequest] = []
        self._script = script
        self._position = 0
        self._faults: collections.deque[Fault | ErrorReply | None] = collections.deque(faults)
        self._cached_prefixes: set[str] = set()
        self._lock = threading.Lock()
        self._address = (host, port)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        """Bind the port and serve in a background thread."""
        server = _Server(self._address, _Handler)
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake-openai",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> FakeOpenAI:
        return self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the server root (the Anthropic SDK's base URL)."""
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running; use it as a context manager or "
                               "call start()")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the base URL for OpenAI-compatible clients."""
        return self.url + "/v1"

    @property
    def remaining(self) -> int:
        """Items of a list script not played yet."""
        return 0 if callable(self._script) else len(self._script) - self._position

    # --- script ------------------------------------------------------------------------------

    def _next(self, request: ModelRequest) -> tuple[Fault | None, FakeItem]:
        """The fault for this request, if any, and the script item it plays."""
        with self._lock:
            fault = self._faults.popleft() if self._faults else None
            if isinstance(fault, ErrorReply):
                return None, fault
            if fault is not None and fault.kind == "status":
                return fault, reply("")
            if callable(self._script):
                return fault, self._script(request)
            if self._position >= len(self._script):
                raise _ScriptExhausted(
                    f"FakeOpenAI got model request {self._position + 1} but its script has "
                    f"{len(self._script)} items")
            item = self._script[self._position]
            if fault is None:  # a cut-short reply is served again on the retry
                self._position += 1
            return fault, item

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        """The size of a request's prompt, as this server measures (and reports) it."""
        return estimate_tokens(json.dumps([body.get("system"), body.get("tools"),
                                           body.get("messages")]))

    def _usage(self, item: Reply | Calls, body: dict[str, Any], flavor: Flavor) -> Usage:
        if item.usage is not None:
            return item.usage
        prompt = self.prompt_tokens(body)
        usage = Usage(prompt, _wire.output_tokens(item))
        if flavor == "anthropic":  # emulate prompt caching of tools + system
            prefix = _cached_prefix(body)
            if prefix:
                size = min(prompt, estimate_tokens(prefix))
                with self._lock:
                    if prefix in self._cached_prefixes:
                        usage.cached_input_tokens = size
                    else:
                        usage.cache_write_tokens = size
                        self._cached_prefixes.add(prefix)
        return usage


def _cached_prefix(body: dict[str, Any]) -> str:
    """The tools and system text up to the last ``cache_control`` mark, or ''."""
    blocks = [*(body.get("tools") or []), *_wire._blocks(body.get("system") or [])]
    marked = [i for i, block in enumerate(blocks) if block.get("cache_control")]
    return json.dumps(blocks[:marked[-1] + 1], sort_keys=True) if marked else ""


class _ScriptExhausted(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1"

    @property
    def fake(self) -> FakeOpenAI:
        return self.server.fake  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [
                {"id": "fake-model", "object": "model", "created": 0, "owned_by": "stateloop"}]})
        else:
            self._json(404, {"error": {"message": f"Unknown path {self.path}",
                                       "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._error("openai", 400, f"We could not parse the JSON body of your request. "
                                       f"({exc})")
            return
        with self.fake._lock:
            self.fake.requests.append(RecordedRequest(
                "POST", path, {k.lower(): v for k, v in self.headers.items()}, body))
        if path == "/v1/chat/completions":
            self._completion("openai", body)
        elif path == "/v1/messages":
            self._completion("anthropic", body)
        elif path == "/v1/embeddings":
            self._embeddings(body)
        else:
            self._json(404, {"error": {"message": f"Unknown path {path}",
                                       "type": "invalid_request_error"}})

    # --- model calls -------------------------------------------------------------------------

    def _completion(self, flavor: Flavor, body: dict[str, Any]) -> None:
        fake = self.fake
        problem = self._auth_problem(flavor) or self._request_problem(flavor, body)
        if problem:
            status, message = problem
            self._error(flavor, status, message)
            return
        if fake.context_window is not None:
            prompt = fake.prompt_tokens(body)
            limit = fake.context_window - int(body.get("max_tokens") or
                                              body.get("max_completion_tokens") or 0)
            if prompt > limit:
                with fake._lock:
                    fake.overflows += 1
                self._fault(flavor, context_overflow())
                return
        request = (_wire.openai_request(body) if flavor == "openai"
                   else _wire.anthropic_request(body))
        try:
            fault, item = fake._next(request)
        except _ScriptExhausted as exc:
            self._error(flavor, 400, str(exc))
            return
        if fake.latency:
            time.sleep(fake.latency)
        if type(item) is ErrorReply:
            fault, item = fault_for(item), reply("")
        if fault is not None and fault.kind == "status":
            self._fault(flavor, fault)
            return
        if isinstance(item, Recorded):
            self._replay(item)
            return
        assert isinstance(item, Reply | Call | Calls), f"not a script item: {item!r}"
        completion = _wire.as_calls(item)
        model = body.get("model") or "fake-model"
        usage = fake._usage(completion, body, flavor)
        if not body.get("stream"):
            whole = (_wire.openai_completion(completion, model, usage) if flavor == "openai"
                     else _wire.anthropic_message(completion, model, usage))
            self._json(200, whole)
            return
        events: list[tuple[str | None, dict[str, Any]]]
        if flavor == "openai":
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = [(None, e) for e in _wire.openai_events(
                completion, model, usage, chunk_size=fake.chunk_size,
                include_usage=include_usage)]
        else:
            events = list(_wire.anthropic_events(completion, model, usage,
                                                 chunk_size=fake.chunk_size))
        self._stream(flavor, events, fault)

    def _auth_problem(self, flavor: Flavor) -> tuple[int, str] | None:
        key = self.fake.api_key
        if key is None:
            return None
        bearer = (self.headers.get("authorization") or "").removeprefix("Bearer ")
        if flavor == "openai" and bearer != key:
            return 401, f"Incorrect API key provided: {bearer[:3]}***."
        # Anthropic's SDKs send x-api-key, or a bearer token in newer versions.
        if flavor == "anthropic" and key not in (self.headers.get("x-api-key"), bearer):
            return 401, "invalid x-api-key"
        return None

    def _request_problem(self, flavor: Flavor, body: dict[str, Any]) -> tuple[int, str] | None:
        if not body.get("model"):
            return 400, "model: Field required"
        if not isinstance(body.get("messages"), list):
            return 400, "messages: Field required"
        for name in self.fake.reject_fields & set(body):
            other = "max_tokens" if name == "max_completion_tokens" else "max_completion_tokens"
            return 400, (f"Unsupported parameter: '{name}' is not supported with this model. "
                         f"Use '{other}' instead.")
        for message in body["messages"]:
            if message.get("role") in self.fake.reject_roles:
                return 400, f"Unexpected message role: {message.get('role')}"
        if flavor == "openai":
            problem = _wire.openai_transcript_error(body["messages"])
        else:
            if not self.headers.get("anthropic-version"):
                return 400, "anthropic-version: header is required"
            problem = _wire.anthropic_request_error(body)
        return (400, problem) if problem else None

    def _stream(self, flavor: Flavor, events: list[tuple[str | None, dict[str, Any]]],
                fault: Fault | None) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for number, (name, data) in enumerate(events):
            if fault is not None and number == fault.after_chunks:
                if fault.kind == "drop":
                    self._drop()
                    return
                # Anthropic's SDK skips events without a name, so the broken one gets one.
                name = "content_block_delta" if flavor == "anthropic" else None
                self._chunk(_event(name, '{"choices": [{"delta": {"content": "tr'))
                self._chunk(b"0\r\n\r\n", raw=True)
                return
            self._chunk(_event(name, json.dumps(data)))
            if self.fake.chunk_delay:
                time.sleep(self.fake.chunk_delay)
        if flavor == "openai":
            self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"0\r\n\r\n", raw=True)

    def _replay(self, item: Recorded) -> None:
        if item.content_type != "text/event-stream":
            self.send_response(item.status)
            self.send_header("content-type", item.content_type)
            self.send_header("content-length", str(len(item.body)))
            self.end_headers()
            self.wfile.write(item.body)
            return
        self.send_response(item.status)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in item.body.replace(b"\r\n", b"\n").split(b"\n\n"):  # one event a chunk
            if event.strip():
                self._chunk(event + b"\n\n")
        self._chunk(b"0\r\n\r\n", raw=True)

    def _chunk(self, data: bytes, *, raw: bool = False) -> None:
        self.wfile.write(data if raw else b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the socket mid-body, as a crashed server or a cut network does."""
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _fault(self, flavor: Flavor, fault: Fault) -> None:
        message = fault.message or MESSAGES.get((flavor, fault.error_kind or ""))
        headers = {}
        if fault.retry_after is not None:
            headers["retry-after"] = f"{fault.retry_after:g}"
            headers["retry-after-ms"] = f"{fault.retry_after * 1000:g}"
        code = "context_length_exceeded" if fault.error_kind == "context_overflow" else None
        self._error(flavor, fault.status, message or f"HTTP {fault.status}", headers, code)

    def _error(self, flavor: Flavor, status: int, message: str,
               headers: dict[str, str] | None = None, code: str | None = None) -> None:
        kind = STATUS_TYPES[flavor].get(status, "invalid_request_error" if status < 500
                                         else "api_error")
        if flavor == "openai":
            body: dict[str, Any] = {"error": {"message": message, "type": kind, "param": None,
                                              "code": code}}
        else:
            body = {"type": "error", "error": {"type": kind, "message": message}}
        self._json(status, body, headers)

    # --- embeddings --------------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any]) -> None:
        problem = self._auth_problem("openai")
        if problem:
            self._error("openai", *problem)
            return
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            self._error("openai", 400, "'input' must be a non-empty string or array of strings")
            return
        dimensions = int(body.get("dimensions") or self.fake.embedding_dimensions)
        data = [{"object": "embedding", "index": i,
                 "embedding": _wire.encode_embedding(_wire.embed(text, dimensions),
                                                     body.get("encoding_format"))}
                for i, text in enumerate(texts)]
        tokens = sum(estimate_tokens(t) for t in texts)
        self._json(200, {"object": "list", "data": data, "model": body.get("model"),
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _json(self, status: int, body: dict[str, Any],
              headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _event(name: str | None, data: str) -> bytes:
    return (f"event: {name}\n" if name else "").encode() + f"data: {data}\n\n".encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # a burst of concurrent agents must not see connection resets

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up mid-stream (a cancelled run) are normal, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


# --- command line -----------------------------------------------------------------------------

def _echo(request: ModelRequest) -> ScriptItem:
    last = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
    return reply(f"You said: {last}")


def load_script(items: list[dict[str, Any]]) -> list[ScriptItem]:
    """Script items from JSON: ``{"reply": ...}``, ``{"call": NAME, "arguments": {...}}``,
    ``{"calls": [...]}`` or ``{"error": KIND}``."""
    def one(data: dict[str, Any]) -> ScriptItem:
        if "reply" in data:
            return reply(data["reply"], reasoning=data.get("reasoning", ""))
        if "call" in data:
            return call(data["call"], **data.get("arguments", {}))
        if "calls" in data:
            return Calls([one(c) for c in data["calls"]])  # type: ignore[misc]
        if "error" in data:
            return error(data["error"], data.get("message"), retry_after=data.get("retry_after"))
        raise ValueError(f"script item {data!r} needs one of 'reply', 'call', 'calls', 'error'")
    return [one(item) for item in items]


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the fake until interrupted; without ``--script`` it echoes the last user message."""
    parser = argparse.ArgumentParser(prog="python -m stateloop.testing.fake_openai",
                                     description=main.__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--script", help="a JSON file with a list of script items")
    parser.add_argument("--latency", type=float, default=0.0,
                        help="seconds before each response starts")
    args = parser.parse_args(argv)
    script: FakeScript = _echo
    if args.script:
        with open(args.script, encoding="utf-8") as file:
            script = load_script(json.load(file))
    fake = FakeOpenAI(script, latency=args.latency, host=args.host, port=args.port).start()
    print(f"fake provider at {fake.base_url} (OpenAI) and {fake.url} (Anthropic); "
          f"Ctrl-C stops", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
