"""Pure ASGI middleware: browser checks (Host, Origin), bearer-token auth, body checks,
trailing-slash tolerance."""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from ..storable import check_json
from .browsers import WRITES, HostNames, cross_site, refused_host

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
    - with tokens configured, every path but health needs ``Authorization: Bearer TOKEN``
      (or Letta's ``X-BARE-PASSWORD: password TOKEN``, or HTTP basic with TOKEN as the
      password, as git sends it after the Basic challenge ``/v1/git/`` answers with);
    - a body over ``max_body`` bytes (``max_upload`` for a file upload) is refused with 413
      before any handler sees it, and a
      JSON body that no route could store (too deep, NaN, an integer over 64 bits, a lone
      surrogate: see ``storable.py``) with 422 naming the path of the value.
    """

    def __init__(self, app: ASGIApp, *, tokens: set[str], max_body: int,
                 max_upload: int | None = None, hosts: Iterable[str] = (),
                 open_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.open_paths = frozenset(open_paths)  # the operator's, besides OPEN_PATHS
        self.tokens = [token.encode() for token in tokens]
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
        if method in WRITES:
            refusal = cross_site(method, headers, self.origins)
            if refusal:
                await reply(send, 403, refusal)
                return
        if (self.tokens and not _open(path) and path not in self.open_paths
                and not self._authorized(headers)):
            # git asks for a password only when challenged with Basic; a page's fetch must
            # not be (its browser would open a login dialog)
            challenge = b'Basic realm="stateloop"' if path.startswith(GIT_PREFIX) else b"Bearer"
            await reply(send, 401, "missing or invalid credentials: send "
                        "'Authorization: Bearer <password or API key>'",
                        [(b"www-authenticate", challenge)])
            return
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
        await self.app(scope, receive, send)

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        given = headers.get(b"authorization", b"")
        scheme, _, token = given.partition(b" ")
        if scheme.lower() == b"basic":  # git's: any user name, the password or key
            try:
                token = base64.b64decode(token.strip(), validate=True).partition(b":")[2]
            except binascii.Error:
                return False
        elif scheme.lower() != b"bearer":
            scheme, _, token = headers.get(b"x-bare-password", b"").partition(b" ")
            if scheme.lower() != b"password":
                return False
        token = token.strip()
        return any(hmac.compare_digest(token, known) for known in self.tokens)

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
