"""Where an outgoing HTTP request may go, and how much it may bring back (MCP servers
over HTTP, ``fetch_webpage``).

``GuardedTransport`` sends every request (the first, and each one a redirect leads to) to
an address it has checked: with ``public_only``, a host with any loopback, private,
link-local or otherwise non-public address is refused, and the request goes to the checked
address itself, the name kept in the ``Host`` header and for TLS, so a name that resolves
elsewhere the second time reaches nothing new. Each response body is bounded in bytes.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator

import anyio
import httpx2

DEFAULT_PORTS = {"http": 80, "https": 443}


class RefusedAddress(httpx2.ConnectError):
    """The host of a URL is not a public address."""


def public(address: str) -> bool:
    """Whether ``address`` (an IP) is on the public internet."""
    found = ipaddress.ip_address(address.split("%")[0])
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        found = found.ipv4_mapped
    return found.is_global and not found.is_multicast


async def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (itself, when it is one)."""
    try:
        found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:  # idna refuses some names
        raise httpx2.ConnectError(f"cannot resolve {host!r}: {exc}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in found))


async def public_address(host: str, port: int) -> str:
    """An address of ``host`` to connect to; ``RefusedAddress`` when any of them is not
    public (a name that also resolves to 127.0.0.1 is refused)."""
    addresses = await resolve(host, port)
    for address in addresses:
        if not public(address):
            shown = host if host == address else f"{host} ({address})"
            raise RefusedAddress(f"{shown} is a loopback, private or link-local address")
    return addresses[0]


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int, problems: list[str]
                 ) -> None:
        self._stream, self._limit, self._problems = stream, limit, problems

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                said = f"its response exceeded {self._limit} bytes"
                self._problems.append(said)
                raise httpx2.ReadError(said)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class GuardedTransport(httpx2.AsyncBaseTransport):
    """httpx's transport with addresses checked (``public_only``) and bodies bounded
    (``max_bytes``; a body cut short says so in ``problems``); proxies from the
    environment are not used."""

    def __init__(self, *, public_only: bool, max_bytes: int | None,
                 problems: list[str] | None = None) -> None:
        self.public_only, self.max_bytes = public_only, max_bytes
        self.problems = problems if problems is not None else []
        self._inner = httpx2.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.public_only:
            url = request.url
            address = await public_address(url.host, url.port or DEFAULT_PORTS[url.scheme])
            extensions = dict(request.extensions)
            if url.scheme == "https":
                extensions["sni_hostname"] = url.host  # the certificate is the name's
            request = httpx2.Request(request.method, url.copy_with(host=address),
                                     headers=request.headers, stream=request.stream,
                                     extensions=extensions)
        if self.max_bytes is not None:
            request.headers["Accept-Encoding"] = "identity"  # the bound counts what is read
        response = await self._inner.handle_async_request(request)
        if self.max_bytes is not None:
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _Bounded(response.stream, self.max_bytes, self.problems)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
