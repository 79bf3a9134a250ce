"""The fake provider's HTTP side: a threaded server on a loopback port and the handler that
answers Chat Completions (OpenAI's paths and an Azure deployment's), Messages, Gemini, their
model listings and embeddings, streaming real SSE and serving injected faults the way each
provider words them."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from ..llm.tokens import estimate_tokens
from . import _wire, _wire_gemini
from ._faults import MESSAGES, STATUS_TYPES, Fault, context_overflow, fault_for
from ._recorded import FakeScriptExhausted, Flavor, Recorded, RecordedRequest
from .scripted import Call, Calls, ErrorReply, Reply, reply

if TYPE_CHECKING:
    from .fake_openai import FakeOpenAI

HOLD_AT_MOST = 300  # seconds a held stream waits for its release at most
_GEMINI = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):(?P<method>generateContent|"
                     r"streamGenerateContent|embedContent|batchEmbedContents)$")
_AZURE = re.compile(r"^/openai/deployments/(?P<model>[^/]+)/(?P<path>chat/completions|"
                    r"embeddings)$")
GEMINI_MODELS = ("gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.0-flash")
GEMINI_EMBEDDING_MODELS = ("gemini-embedding-001", "text-embedding-004")
AZURE_DEPLOYMENTS = (("fake-deployment", "gpt-4o"), ("fake-embedding", "text-embedding-3-small"))


class Server(ThreadingHTTPServer):
    """One thread a connection; ``fake`` is the ``FakeOpenAI`` whose script it plays."""

    daemon_threads = True
    request_queue_size = 1024  # a burst of concurrent agents must not see connection resets

    def __init__(self, address: tuple[str, int], fake: FakeOpenAI) -> None:
        super().__init__(address, Handler)
        self.fake = fake

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up mid-stream (a cancelled run) are normal, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    """One connection's requests, answered from the fake's script."""

    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1"
    # Each SSE event is its own small write: with Nagle's algorithm the last one would wait
    # for the client's delayed ACK, 40 ms on Linux, on every response.
    disable_nagle_algorithm = True

    @property
    def fake(self) -> FakeOpenAI:
        server = self.server
        assert isinstance(server, Server)
        return server.fake

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        path = path.rstrip("/")
        with self.fake._lock:
            self.fake.listings.append(RecordedRequest(
                "GET", self.path, {k.lower(): v for k, v in self.headers.items()}, {}))
        if path == "/v1beta/models":
            problem = self._auth_problem("gemini")
            if problem:
                self._error("gemini", *problem)
                return
            self._json(200, {"models": [
                {"name": f"models/{name}", "displayName": name, "inputTokenLimit": 1_048_576,
                 "outputTokenLimit": 65_536,
                 "supportedGenerationMethods": ["generateContent", "countTokens"]}
                for name in GEMINI_MODELS] + [
                {"name": f"models/{name}", "displayName": name, "inputTokenLimit": 2_048,
                 "outputTokenLimit": 1, "supportedGenerationMethods": ["embedContent"]}
                for name in GEMINI_EMBEDDING_MODELS]})
        elif path == "/v1/models" and self.headers.get("anthropic-version"):
            problem = self._auth_problem("anthropic")
            if problem:
                self._error("anthropic", *problem)
                return
            self._json(200, _wire.anthropic_models_page(dict(
                pair.partition("=")[::2] for pair in query.split("&") if pair)))
        elif path == "/v1/models":
            problem = self._auth_problem("openai")
            if problem:
                self._error("openai", *problem)
                return
            self._json(200, {"object": "list", "data": [
                {"id": "fake-model", "object": "model", "created": 0, "owned_by": "stateloop"}]})
        elif path == "/openai/deployments":  # Azure's deployments, with its key in ``api-key``
            problem = self._azure_problem()
            if problem:
                self._error("openai", *problem)
                return
            self._json(200, {"object": "list", "data": [
                {"id": name, "model": model, "owner": "organization-owner", "object": "deployment",
                 "status": "succeeded", "created_at": 0, "updated_at": 0,
                 "scale_settings": {"scale_type": "standard"}}
                for name, model in AZURE_DEPLOYMENTS]})
        else:
            self._json(404, {"error": {"message": f"Unknown path {self.path}",
                                       "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        path = path.rstrip("/")
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
        elif azure := _AZURE.match(path):
            problem = self._azure_problem()
            if problem:
                self._error("openai", *problem)
                return
            body.setdefault("model", azure["model"])  # Azure names the deployment in the path
            if azure["path"] == "embeddings":
                self._embeddings(body, checked=True)
            else:
                self._completion("openai", body, checked=True)
        elif (gemini := _GEMINI.match(path)) and gemini["method"].endswith("mbedContents"):
            self._gemini_embeddings(gemini["model"], body)
        elif gemini and gemini["method"] == "embedContent":
            self._gemini_embeddings(gemini["model"], {"requests": [body]}, single=True)
        elif gemini:
            body["model"] = gemini["model"]  # Gemini names the model in the path
            if gemini["method"] == "streamGenerateContent":
                body["stream"] = "alt=sse" in query.split("&")
            self._completion("gemini", body)
        else:
            self._json(404, {"error": {"message": f"Unknown path {path}",
                                       "type": "invalid_request_error"}})

    # --- model calls -------------------------------------------------------------------------

    def _completion(self, flavor: Flavor, body: dict[str, Any], *, checked: bool = False) -> None:
        fake = self.fake
        problem = ((None if checked else self._auth_problem(flavor))
                   or self._request_problem(flavor, body))
        if problem:
            status, message = problem
            self._error(flavor, status, message)
            return
        if fake.context_window is not None:
            prompt = fake.prompt_tokens(body)
            limit = fake.context_window - int(
                body.get("max_tokens") or body.get("max_completion_tokens")
                or (body.get("generationConfig") or {}).get("maxOutputTokens") or 0)
            if prompt > limit:
                with fake._lock:
                    fake.overflows += 1
                self._fault(flavor, context_overflow())
                return
        try:
            fault, item = fake.next_item(body, flavor)
        except FakeScriptExhausted as exc:
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
        if fake.mistral_ids and isinstance(completion, Calls):  # Mistral makes 9-character ids
            completion = dataclasses.replace(completion, calls=[
                dataclasses.replace(c, id=c.id or _wire.mistral_id()) for c in completion.calls])
        model = body.get("model") or "fake-model"
        usage = fake._usage(completion, body, flavor)
        if not body.get("stream"):
            whole = (_wire.openai_completion(completion, model, usage) if flavor == "openai"
                     else _wire_gemini.gemini_response(completion, model, usage)
                     if flavor == "gemini" else _wire.anthropic_message(completion, model, usage))
            self._json(200, whole)
            return
        events: list[tuple[str | None, dict[str, Any]]]
        if flavor == "openai":
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = [(None, e) for e in _wire.openai_events(
                completion, model, usage, chunk_size=fake.chunk_size,
                include_usage=include_usage)]
        elif flavor == "gemini":
            events = [(None, e) for e in _wire_gemini.gemini_events(
                completion, model, usage, chunk_size=fake.chunk_size)]
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
        if flavor == "gemini":  # Google answers a wrong key with a 400
            given = self.headers.get("x-goog-api-key")
            if not given:
                return 403, ("Method doesn't allow unregistered callers (callers without "
                             "established identity). Please use API Key or other form of API "
                             "consumer identity to call this API.")
            if given != key:
                return 400, "API key not valid. Please pass a valid API key."
        return None

    def _azure_problem(self) -> tuple[int, str] | None:
        """Azure's answer to a request whose key is not in ``api-key`` (a Bearer token there
        is an Entra ID token, which a key is not)."""
        given = self.headers.get("api-key")
        if not given or (self.fake.api_key is not None and given != self.fake.api_key):
            return 401, ("Access denied due to invalid subscription key or wrong API endpoint. "
                         "Make sure to provide a valid key for an active subscription and use "
                         "a correct regional API endpoint for your resource.")
        return None

    def _request_problem(self, flavor: Flavor, body: dict[str, Any]) -> tuple[int, str] | None:
        if not body.get("model"):
            return 400, "model: Field required"
        if flavor == "gemini":
            problem = _wire_gemini.gemini_request_error(body, body["model"])
            return (400, problem) if problem else None
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
            if self.fake.mistral_ids and not problem:
                problem = _wire.mistral_id_error(body["messages"])
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
            if number == self.fake.hold_after:
                self.fake.release.wait(HOLD_AT_MOST)
            self._chunk(_event(name, json.dumps(data)))
            if self.fake.chunk_delay:
                time.sleep(self.fake.chunk_delay)
        if flavor == "openai":  # Gemini's stream just ends
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
        if flavor == "gemini":  # the delay is in the body's RetryInfo, 503 for overloaded
            status = 503 if fault.status == 529 else fault.status
            self._error(flavor, status, message or f"HTTP {status}",
                        retry_after=fault.retry_after)
            return
        if fault.retry_after is not None:
            headers["retry-after"] = f"{fault.retry_after:g}"
            headers["retry-after-ms"] = f"{fault.retry_after * 1000:g}"
        code = "context_length_exceeded" if fault.error_kind == "context_overflow" else None
        self._error(flavor, fault.status, message or f"HTTP {fault.status}", headers, code)

    def _error(self, flavor: Flavor, status: int, message: str,
               headers: dict[str, str] | None = None, code: str | None = None, *,
               retry_after: float | None = None) -> None:
        if flavor == "gemini":
            reason = "API_KEY_INVALID" if message.startswith("API key not valid") else None
            self._json(status, _wire_gemini.error_body(status, message, reason=reason,
                                                       retry_after=retry_after))
            return
        kind = STATUS_TYPES[flavor].get(status, "invalid_request_error" if status < 500
                                         else "api_error")
        if flavor == "openai":
            body: dict[str, Any] = {"error": {"message": message, "type": kind, "param": None,
                                              "code": code}}
        else:
            body = {"type": "error", "error": {"type": kind, "message": message}}
        self._json(status, body, headers)

    # --- embeddings --------------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any], *, checked: bool = False) -> None:
        problem = None if checked else self._auth_problem("openai")
        if problem:
            self._error("openai", *problem)
            return
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            self._error("openai", 400, "'input' must be a non-empty string or array of strings")
            return
        dimensions = int(body.get("dimensions") or self.fake.embedding_dimensions
                         or _wire.EMBEDDING_DIMS.get(str(body.get("model")), 64))
        data = [{"object": "embedding", "index": i,
                 "embedding": _wire.encode_embedding(_wire.embed(text, dimensions),
                                                     body.get("encoding_format"))}
                for i, text in enumerate(texts)]
        tokens = sum(estimate_tokens(t) for t in texts)
        self._json(200, {"object": "list", "data": data, "model": body.get("model"),
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _gemini_embeddings(self, model: str, body: dict[str, Any], *,
                           single: bool = False) -> None:
        """``batchEmbedContents`` (``embedContent``: one request, one ``embedding``)."""
        problem = self._auth_problem("gemini")
        requests = body.get("requests")
        if problem is None and (not isinstance(requests, list) or not requests):
            problem = 400, "* BatchEmbedContentsRequest.requests: at least one is required"
        texts: list[str] = []
        for number, request in enumerate(requests or []):
            if problem:
                break
            request = request if isinstance(request, dict) else {}
            parts = (request.get("content") or {}).get("parts")
            if not single and request.get("model") != f"models/{model}":
                problem = 400, (f"* BatchEmbedContentsRequest.requests[{number}].model: the "
                                f"model must be models/{model}")
            elif not isinstance(parts, list) or not parts or not all(
                    isinstance(part, dict) and isinstance(part.get("text"), str)
                    for part in parts):
                problem = 400, f"* requests[{number}].content.parts: text parts are required"
            else:
                texts.append(" ".join(part["text"] for part in parts))
        if problem:
            self._error("gemini", *problem)
            return
        dimensions = int(body.get("outputDimensionality") or self.fake.embedding_dimensions
                         or 768)
        vectors = [{"values": _wire.embed(text, dimensions)} for text in texts]
        self._json(200, {"embedding": vectors[0]} if single else {"embeddings": vectors})

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
