"""What a web browser may be made to send: the Host names the server answers to (a page on
a rebound DNS name gives its own), writes from other origins, and the forms any page can post
without asking (CSRF). Header names and values are bytes, as ASGI gives them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# A page on any origin may POST these bodies without a preflight (CORS-safelisted types).
_SIMPLE_TYPES = frozenset({b"multipart/form-data", b"application/x-www-form-urlencoded",
                           b"text/plain"})
# Headers no page can add without a preflight, which this server never grants: a request
# carrying one was not sent by a browser for another origin.
_MARKS = (b"authorization", b"x-bare-password", b"x-requested-with")
_MARK_PREFIX = b"x-stainless-"  # every request of Letta's generated clients


class HostNames:
    """Accepted ``Host`` values: ``name:port`` exactly, ``name`` with any port, ``*`` any."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.exact: set[bytes] = set()
        self.names: set[bytes] = set()
        self.shown = sorted({entry.strip().lower() for entry in entries} - {""})
        self.any = "*" in self.shown
        for entry in self.shown:
            name, port = split_host(entry.encode("idna" if not entry.isascii() else "ascii"))
            if port:
                self.exact.add(name + b":" + port)
            else:
                self.names.add(name)

    def __contains__(self, host: object) -> bool:
        if not isinstance(host, bytes):
            return False
        host = host.lower()
        if self.any or host in self.exact:
            return True
        return bool(self.names) and split_host(host)[0] in self.names


def split_host(value: bytes) -> tuple[bytes, bytes]:
    """``(name, port)`` of ``host[:port]``; an IPv6 address in brackets, with or without."""
    if value.startswith(b"["):
        name, _, rest = value.partition(b"]")
        return name + b"]", rest.removeprefix(b":")
    if value.count(b":") > 1:  # a bare IPv6 address
        return b"[" + value + b"]", b""
    name, _, port = value.partition(b":")
    return name, port


def refused_host(host: bytes, allowed: HostNames) -> str:
    return (f"Host {host.decode('latin-1')!r} is not an address of this server (a page on a "
            f"rebound DNS name?): it answers to {', '.join(allowed.shown)}. Behind a proxy or "
            "under another name, add that name to STATELOOP_ALLOWED_HOSTS")


def cross_site(method: str, headers: Mapping[bytes, bytes], allowed: HostNames | None,
               ) -> str | None:
    """Why a write (POST, PUT, PATCH, DELETE) may come from another site's page, or None.

    An ``Origin`` must be the request's own ``Host`` or an allowed name; ``Sec-Fetch-Site``
    must not say ``cross-site``; and a POST of a form (multipart, urlencoded, text) with no
    ``Origin`` must carry a header no page can add unasked: ``Authorization``,
    ``X-Requested-With`` or Letta's clients' ``X-Stainless-*``."""
    origin = headers.get(b"origin")
    if origin is not None:
        where = origin.partition(b"://")[2].lower()
        if where != headers.get(b"host", b"").lower() and not (
                allowed is not None and not allowed.any and where in allowed):
            return (f"a {method} from the page of another origin "
                    f"({origin.decode('latin-1')!r}) is refused: only this server's own page "
                    "may write from a browser")
    if headers.get(b"sec-fetch-site") == b"cross-site":
        return f"a {method} from another site's page is refused (Sec-Fetch-Site: cross-site)"
    if origin is None and method == "POST" and _simple(headers.get(b"content-type", b"")) and (
            not _marked(headers)):
        return ("a form POST (multipart, urlencoded or text) needs a header no web page can "
                "send for another site: Authorization, X-Requested-With, or the X-Stainless-* "
                "headers Letta's clients send")
    return None


def _simple(content_type: bytes) -> bool:
    return content_type.partition(b";")[0].strip().lower() in _SIMPLE_TYPES


def _marked(headers: Mapping[bytes, bytes]) -> bool:
    return any(mark in headers for mark in _MARKS) or any(
        name.startswith(_MARK_PREFIX) for name in headers)


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of an http(s) URL, lower-cased (a browser's ``Origin``), or
    None for anything else."""
    scheme, sep, rest = url.strip().partition("://")
    host = rest.partition("/")[0].lower()
    if not sep or scheme.lower() not in ("http", "https") or not host or "@" in host or (
            len(host) > 261 or not all(c.isalnum() or c in ".-:[]_" for c in host)):
        return None
    return f"{scheme.lower()}://{host}"


def preflight(origin: bytes, headers: Mapping[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    """The headers that let a page of ``origin`` send the request a CORS preflight asks
    about (its method and headers: ``Authorization`` among them)."""
    return [*allow(origin),
            (b"access-control-allow-methods", b"GET, POST, PUT, PATCH, DELETE"),
            (b"access-control-allow-headers",
             headers.get(b"access-control-request-headers", b"authorization, content-type")),
            (b"access-control-max-age", b"600")]


def allow(origin: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin), (b"vary", b"Origin")]
