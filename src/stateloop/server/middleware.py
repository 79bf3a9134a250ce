"""Pure ASGI middleware: browser checks (Host, Origin, CORS for client-side tokens), who the
caller is (credentials.py), the audit row of each write, body checks, trailing-slash
tolerance."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

from ..storable import check_json
from ..store.projects import acting_project
from .browsers import WRITES, HostNames, allow, cross_site, preflight, refused_host
from .credentials import (
    ADMIN,
    Caller,
    Credentials,
    Principal,
    Refused,
    presented,
    project_asked,
    redact,
)

if TYPE_CHECKING:
    from ..store.sql import SqlStore

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/v1/health", "/v1/health/"})
# The web page and its files hold no data (it calls the API with the password it asks for).
OPEN_PAGE = "/"
OPEN_PREFIX = "/ui/"
GIT_PREFIX = "/v1/git/"  # memory repositories over git's smart HTTP
logger = logging.getLogger("stateloop.server")


async def reply(send: Send, status: int, detail: Any,
                headers: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


class ServerMiddleware:
    """Everything done to a request before routing, in one pass:

    - with ``hosts`` (``STATELOOP_ALLOWED_HOSTS``; ``serve`` adds the address it binds), a
      ``Host`` that is none of them is refused with 400 (a page on a rebound DNS name);
    - a write whose ``Origin`` is another site's, or a form POST no client but a page's
      could have sent, is refused with 403 (see ``browsers.cross_site``);
    - ``/v1/agents/`` and ``/v1/agents`` are the same route (Letta's clients use the slash);
    - with credentials configured, every path but health needs ``Authorization: Bearer
      TOKEN`` (or Letta's ``X-BARE-PASSWORD: password TOKEN``, or HTTP basic with TOKEN as
      the password, as git sends it after the Basic challenge ``/v1/git/`` answers with);
      the caller's ``Principal`` goes in the scope (``stateloop.access``) for
      ``permissions.guard``, and each write it makes is a row of the audit log;
    - a client-side access token may be used by pages of its ``hostname`` only: their CORS
      preflights are answered, and their requests carry ``Access-Control-Allow-Origin``;
    - a body over ``max_body`` bytes (``max_upload`` for a file upload) is refused with 413
      before any handler sees it, and a
      JSON body that no route could store (too deep, NaN, an integer over 64 bits, a lone
      surrogate: see ``storable.py``) with 422 naming the path of the value.
    """

    def __init__(self, app: ASGIApp, *, credentials: Credentials, max_body: int,
                 max_upload: int | None = None, hosts: Iterable[str] = (),
                 open_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.open_paths = frozenset(open_paths)  # the operator's, besides OPEN_PATHS
        self.credentials = credentials
        self.max_body = max_body
        self.max_upload = max_upload or max_body
        named = HostNames(hosts)
        self.hosts = named if named.shown and not named.any else None
        self.origins = named if named.shown else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        headers = dict(scope["headers"])
        if self.hosts is not None and path not in OPEN_PATHS:
            host = headers.get(b"host", b"")
            if host not in self.hosts:
                await reply(send, 400, refused_host(host, self.hosts))
                return
        method: str = scope["method"]
        origin = headers.get(b"origin")
        if (method == "OPTIONS" and origin is not None
                and b"access-control-request-method" in headers
                and await self._token_origin(scope, origin)):
            await send({"type": "http.response.start", "status": 204,
                        "headers": preflight(origin, headers)})
            await send({"type": "http.response.body", "body": b""})
            return
        secret = presented(headers)
        principal: Principal | None = None
        if secret is not None:
            try:
                principal = await self.credentials.resolve(secret, _store(scope))
            except Refused as why:
                await reply(send, 401, str(why), [(b"www-authenticate", b"Bearer")])
                return
        if method in WRITES:
            refusal = cross_site(method, headers, self.origins)
            if refusal and not (principal is not None and principal.hostname is not None
                                and origin == principal.hostname.encode()):
                await reply(send, 403, refusal)
                return
        if principal is None:
            if (self.credentials.required and not _open(path)
                    and path not in self.open_paths):
                # git asks for a password only when challenged with Basic; a page's fetch
                # must not be (its browser would open a login dialog)
                challenge = (b'Basic realm="stateloop"' if path.startswith(GIT_PREFIX)
                             else b"Bearer")
                await reply(send, 401, "missing or invalid credentials: send "
                            "'Authorization: Bearer <password or API key>'",
                            [(b"www-authenticate", challenge)])
                return
            if not self.credentials.required:
                principal = ADMIN
        if principal is not None and principal.hostname is not None and origin is not None:
            if origin.decode("latin-1").lower() != principal.hostname:
                await reply(send, 403, "this client-side access token is for pages of "
                            f"{principal.hostname}, not of {origin.decode('latin-1')!r}")
                return
            send = _with_headers(send, allow(origin))
        caller, project = None, None
        if principal is not None:
            try:
                project = project_asked(principal, headers)
            except ValueError as why:
                await reply(send, 403, str(why))
                return
        if principal is not None and (principal is not ADMIN or project is not None):
            caller = Caller(principal)
            scope = {**scope, "stateloop.access": caller}
        if len(path) > 1 and path.endswith("/"):
            scope = {**scope, "path": path.rstrip("/")}
        if method in ("POST", "PUT", "PATCH"):
            length = headers.get(b"content-length")
            limit = self.max_upload if path.endswith("/upload") else self.max_body
            if length is not None and length.isdigit() and int(length) > limit:
                await reply(send, 413, f"request body is {int(length)} bytes; the limit is "
                            f"{limit}")
                return
            body = await self._read(receive, limit)
            if body is None:
                await reply(send, 413, f"request body is over the limit of {limit} bytes")
                return
            content_type = headers.get(b"content-type", b"")
            binary = content_type.startswith((b"multipart/", b"application/x-git-"))
            problem = None if binary else check_json(body)
            if problem:
                await reply(send, 422, [{"loc": ["body", *problem.loc], "msg": problem.msg,
                                         "type": problem.type}])
                return
            receive = _replay(body, receive)
        if project is None:
            await self._answer(scope, receive, send, caller, method, path)
            return
        acting = acting_project.set(project)
        try:
            await self._answer(scope, receive, send, caller, method, path)
        finally:
            acting_project.reset(acting)

    async def _answer(self, scope: Scope, receive: Receive, send: Send, caller: Caller | None,
                      method: str, path: str) -> None:
        """The app's answer; for a write by a credential, its row in the audit log."""
        if caller is None or method not in WRITES or caller.principal is ADMIN:
            await self.app(scope, receive, send)
            return
        status = 500
        original = send

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await original(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            await _audit(scope, caller, method, path, status)

    async def _token_origin(self, scope: Scope, origin: bytes) -> bool:
        """Whether a live client-side token is for pages of ``origin``."""
        store = _store(scope)
        return store is not None and await store.origin_has_token(
            origin.decode("latin-1").lower(), time.time())

    async def _read(self, receive: Receive, limit: int) -> bytes | None:
        """The whole body, or None once it passes the limit (chunked uploads included)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _store(scope: Scope) -> SqlStore | None:
    runtime = getattr(getattr(scope.get("app"), "state", None), "runtime", None)
    return None if runtime is None else runtime.store


async def _audit(scope: Scope, caller: Caller, method: str, path: str, status: int) -> None:
    """One row of the audit log; a store that fails to take it is logged, not the caller's
    problem (the request was answered)."""
    store = _store(scope)
    if store is None:
        return
    try:
        await store.record_audit([{
            "at": time.time(), "credential": caller.principal.id,
            "project": acting_project.get(), "method": method,
            "route": caller.route or "", "path": redact(path)[:1000], "status": status}])
    except Exception:
        logger.exception("could not record %s %s in the audit log", method, path)


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending


def _open(path: str) -> bool:
    return path in OPEN_PATHS or path == OPEN_PAGE or path.startswith(OPEN_PREFIX)


def _replay(body: bytes, original: Receive) -> Receive:
    """The body read already, then the connection's own messages (a disconnect, later)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await original()

    return receive
