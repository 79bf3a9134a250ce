"""Who a request is: the credential it presents (the server password, a key of
``STATELOOP_API_KEYS``, an API key made over the API, or a client-side access token) turned
into a ``Principal``, compared in constant time. Keys and tokens made over the API are
``<prefix><id>.<secret>``; the store keeps the SHA-256 digest of the secret (256 random bits:
nothing to stretch), and is read on every request that presents one, so a key revoked or a
token deleted through any process is refused by all of them at once."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from ..store.projects import DEFAULT_PROJECT

if TYPE_CHECKING:
    from ..store.sql import SqlStore

Role = Literal["admin", "write", "read", "token"]
KEY_PREFIX = "sk-sl-"
TOKEN_PREFIX = "ck-sl-"
_SHAPE = re.compile(rb"^(sk-sl-|ck-sl-)([0-9a-f]{24})\.([A-Za-z0-9_-]{43})$")
_SECRET_IN_TEXT = re.compile(r"((?:sk|ck)-sl-[0-9a-f]{24})\.[A-Za-z0-9_-]{43}")


@dataclasses.dataclass(frozen=True)
class Principal:
    """What a credential may do. ``id`` names it in the audit log and in ``created_by``
    (never its secret); a token's ``grants`` are its policy, agent id -> access."""

    id: str
    role: Role
    project: str = DEFAULT_PROJECT
    grants: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    hostname: str | None = None

    @property
    def admin(self) -> bool:
        return self.role == "admin"


ADMIN = Principal("open", "admin")  # every caller of a server without credentials


class Caller:
    """A request's principal, in its scope as ``stateloop.access``; the route template the
    guard found is noted on it for the audit log (scopes are copied, this is shared)."""

    __slots__ = ("principal", "route")

    def __init__(self, principal: Principal) -> None:
        self.principal = principal
        self.route: str | None = None


class Refused(Exception):
    """A credential that was one but is no longer (expired, revoked): 401 with the reason."""


def new_secret(prefix: str) -> tuple[str, str, str]:
    """``(id, the whole secret to hand out once, the digest to store)``."""
    ident = secrets.token_hex(12)
    secret = secrets.token_urlsafe(32)
    return ident, f"{prefix}{ident}.{secret}", digest(secret)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_id(value: str) -> str | None:
    """The id in a client-side token, or in the handle ``ck-sl-<id>`` a listing shows."""
    match = re.fullmatch(r"ck-sl-([0-9a-f]{24})(?:\.[A-Za-z0-9_-]{43})?", value)
    return match.group(1) if match else None


def redact(text: str) -> str:
    """``text`` with the secret of any key or token in it cut to its handle (a token may be
    in a path: ``DELETE /v1/client-side-access-tokens/{token}``)."""
    return _SECRET_IN_TEXT.sub(r"\1.<redacted>", text)


def project_asked(principal: Principal, headers: Mapping[bytes, bytes]) -> str | None:
    """The project the request acts in: a key's or token's own; for an admin the one its
    ``X-Project-Id`` or ``X-Project`` names (as letta-client sends them), else None: every
    project. ``ValueError`` saying why for a project the credential may not act in."""
    asked = headers.get(b"x-project-id") or headers.get(b"x-project")
    named = None
    if asked is not None:
        named = asked.decode("latin-1").strip()
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", named):
            raise ValueError("X-Project-Id / X-Project: a project is 1 to 200 letters, "
                             "digits, '.', '_' or '-'")
    if principal.admin:
        return named
    if named is not None and named != principal.project:
        raise ValueError(f"this credential belongs to project {principal.project!r}, not "
                         f"{named!r}")
    return principal.project


def presented(headers: Mapping[bytes, bytes]) -> bytes | None:
    """The secret a request presents: ``Authorization: Bearer``, Letta's ``X-BARE-PASSWORD:
    password ...``, or HTTP basic with it as the password (as git sends it)."""
    given = headers.get(b"authorization", b"")
    scheme, _, token = given.partition(b" ")
    if scheme.lower() == b"basic":  # git's: any user name, the password or key
        try:
            return base64.b64decode(token.strip(), validate=True).partition(b":")[2].strip()
        except binascii.Error:
            return None
    if scheme.lower() != b"bearer":
        scheme, _, token = headers.get(b"x-bare-password", b"").partition(b" ")
        if scheme.lower() != b"password":
            return None
    return token.strip() or None


class Credentials:
    """The environment's credentials (each an admin) and the store's keys and tokens."""

    def __init__(self, environment: Iterable[tuple[str, str]]) -> None:
        self.environment = [(name, secret.encode()) for name, secret in environment]

    @property
    def required(self) -> bool:
        """Whether a request must present a credential (the operator set one)."""
        return bool(self.environment)

    async def resolve(self, secret: bytes, store: SqlStore | None) -> Principal | None:
        """The principal of ``secret``, None when it is no credential; ``Refused`` when it
        was one that expired or was revoked."""
        found = None
        for name, known in self.environment:  # every one compared: no early exit to time
            if hmac.compare_digest(secret, known):
                found = name
        if found is not None:
            return Principal(found, "admin")
        shape = _SHAPE.match(secret)
        if shape is None or store is None:
            return None
        prefix, ident, given = (part.decode() for part in shape.groups())
        now = time.time()
        if prefix == KEY_PREFIX:
            key = await store.get_api_key(ident)
            if key is None or not hmac.compare_digest(digest(given), key.digest):
                return None
            if key.revoked_at is not None:
                raise Refused(f"API key {key.id} ({key.name!r}) was revoked")
            if key.expires_at is not None and key.expires_at <= now:
                raise Refused(f"API key {key.id} ({key.name!r}) has expired")
            return Principal(f"key-{key.id}", key.role,  # type: ignore[arg-type]
                             key.project)
        token = await store.get_access_token(ident)
        if token is None or not hmac.compare_digest(digest(given), token.digest):
            return None
        if token.expires_at <= now:
            raise Refused("this client-side access token has expired")
        grants: dict[str, frozenset[str]] = {}
        for entry in token.policy:
            grants[entry["id"]] = grants.get(entry["id"], frozenset()) | set(entry["access"])
        return Principal(f"token-{token.id}", "token", token.project, grants, token.hostname)
