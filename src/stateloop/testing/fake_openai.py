"""A fake model provider over real HTTP: OpenAI Chat Completions (and Azure's deployment
paths), Anthropic Messages, Google's Gemini ``generateContent``, each one's model listing,
embeddings (OpenAI's and Gemini's).

``FakeOpenAI`` plays a ``ScriptedModel`` script (``reply``, ``call``, ``calls``, ``error``, or a
function of the request) on a loopback port, streaming real SSE. Faults (429 with
Retry-After, 500, 529, context overflow, a malformed chunk, a dropped connection) can be
injected before script items; like the real services it rejects transcripts whose tool
calls and results do not pair up (and, for Gemini, turns that do not alternate and tool
schemas outside Gemini's subset).

    with FakeOpenAI([call("add", a=1, b=2), reply("3")], faults=[rate_limited(0.01)]) as fake:
        agent = Agent(model="openai/gpt-4o-mini", base_url=fake.base_url, api_key="test")

Run it standalone with ``python -m stateloop.testing.fake_openai --port 8000``.

This module owns ``FakeOpenAI`` (lifecycle, script, usage) and the command line; the HTTP
handler is in ``_http``, the wire formats in ``_wire`` (Gemini's in ``_wire_gemini``), the
faults in ``_faults``, and the script and recording types in ``_recorded``.
"""

from __future__ import annotations

import argparse
import collections
import json
import threading
import time
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any

from ..llm.base import ModelRequest
from ..llm.tokens import estimate_tokens
from ..messages import Usage
from . import _wire, _wire_gemini
from ._faults import (
    Fault,
    context_overflow,
    dropped_connection,
    http_error,
    malformed_chunk,
    overloaded,
    rate_limited,
    server_error,
)
from ._http import Server
from ._recorded import (
    FakeItem,
    FakeScript,
    FakeScriptExhausted,
    Flavor,
    Recorded,
    RecordedRequest,
    recorded,
)
from .scripted import Calls, ErrorReply, Reply, ScriptItem, call, error, reply

__all__ = [
    "FakeItem", "FakeOpenAI", "FakeScript", "FakeScriptExhausted", "Fault", "Recorded",
    "RecordedRequest", "context_overflow", "dropped_connection", "http_error", "load_script",
    "main", "malformed_chunk", "overloaded", "rate_limited", "recorded", "server_error",
]


class FakeOpenAI:
    """An in-process HTTP server on a free loopback port that plays ``script``.

    ``base_url`` is for OpenAI-style clients (it ends in ``/v1``); ``url`` for the Anthropic
    SDK, which adds ``/v1`` itself, and for Gemini (``GeminiModel(base_url=fake.url)``).
    Embeddings have ``embedding_dimensions`` values (unset: OpenAI's size for its own
    models, such as 1536 for text-embedding-3-small, else 64).
    ``faults`` are served one per model request, before the script moves on (``None`` serves
    the script normally). A streamed reply pauses after ``hold_after`` chunks until
    ``release`` is set, so a test sees a run in flight for as long as it needs, however slow
    the machine. Every request lands in ``requests`` (a model listing's in ``listings``).
    With ``mistral_ids`` its tool-call ids are Mistral's (nine letters and digits) and a
    request with any other is refused, as Mistral does. Azure's deployment paths
    (``/openai/deployments/NAME/...``) take the key in ``api-key`` only.
    """

    def __init__(self, script: FakeScript = (), *, latency: float = 0.0, chunk_delay: float = 0.0,
                 chunk_size: int = 8, faults: Iterable[Fault | ErrorReply | None] = (),
                 api_key: str | None = None, embedding_dimensions: int | None = None,
                 reject_roles: Sequence[str] = (), reject_fields: Sequence[str] = (),
                 context_window: int | None = None, hold_after: int | None = None,
                 mistral_ids: bool = False, host: str = "127.0.0.1", port: int = 0) -> None:
        self.latency = latency
        self.chunk_delay = chunk_delay
        self.hold_after = hold_after
        self.release = threading.Event()
        self.chunk_size = chunk_size
        self.api_key = api_key
        self.embedding_dimensions = embedding_dimensions
        self.reject_roles = set(reject_roles)
        self.reject_fields = set(reject_fields)
        self.context_window = context_window  # prompts over it get the overflow error
        self.overflows = 0  # how many requests were refused for being too long
        self.mistral_ids = mistral_ids
        self.requests: list[RecordedRequest] = []
        self.listings: list[RecordedRequest] = []  # model listings asked for (GET)
        self._script = script
        self._position = 0
        self._faults: collections.deque[Fault | ErrorReply | None] = collections.deque(faults)
        self._cached_prefixes: set[str] = set()
        self._lock = threading.Lock()
        self._address = (host, port)
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        """Bind the port and serve in a background thread."""
        server = Server(self._address, self)
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

    def next_item(self, body: dict[str, Any], flavor: Flavor) -> tuple[Fault | None, FakeItem]:
        """The fault for this request, if any, and the script item it plays."""
        script = self._script
        # Read back as a ModelRequest only for a script function: for a long transcript that
        # costs more than the rest of the answer.
        request = (None if not callable(script) else _wire.openai_request(body)
                   if flavor == "openai" else _wire_gemini.gemini_request(body)
                   if flavor == "gemini" else _wire.anthropic_request(body))
        with self._lock:
            fault = self._faults.popleft() if self._faults else None
            if isinstance(fault, ErrorReply):
                return None, fault
            if fault is not None and fault.kind == "status":
                return fault, reply("")
            if callable(script):
                assert request is not None
                return fault, script(request)
            if self._position >= len(script):
                raise FakeScriptExhausted(
                    f"FakeOpenAI got model request {self._position + 1} but its script has "
                    f"{len(script)} items")
            item = script[self._position]
            if fault is None:  # a cut-short reply is served again on the retry
                self._position += 1
            return fault, item

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        """The size of a request's prompt, as this server measures (and reports) it."""
        return estimate_tokens(json.dumps([body.get("system") or body.get("systemInstruction"),
                                           body.get("tools"),
                                           body.get("messages") or body.get("contents")]))

    def _usage(self, item: Reply | Calls, body: dict[str, Any], flavor: Flavor) -> Usage:
        if item.usage is not None:
            return item.usage
        prompt = self.prompt_tokens(body)
        usage = Usage(prompt, _wire.output_tokens(item))
        if flavor == "gemini" and type(item) is Reply and item.reasoning:
            usage.reasoning_tokens = len(item.reasoning) // 4 + 1  # counted in the output
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
    print(f"fake provider at {fake.base_url} (OpenAI) and {fake.url} (Anthropic, Gemini); "
          f"Ctrl-C stops", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
