"""Who can reach the server: off loopback, only with a password or API keys (or on purpose);
and by which names a browser may reach it."""

from __future__ import annotations

import ipaddress

from ..errors import ConfigError
from .settings import ServerSettings


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: addresses only this machine can connect to."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def check_exposure(host: str, settings: ServerSettings) -> None:
    """Refuse to serve every agent, its memory and its tools to the network without auth."""
    if is_loopback(host) or settings.tokens():
        return
    raise ConfigError(
        f"refusing to serve on {host} without authentication: anyone who can reach it could "
        "read and run every agent. Set STATELOOP_SERVER_PASSWORD (or STATELOOP_API_KEYS), "
        "bind to 127.0.0.1, or pass --insecure to serve openly anyway")


# Binding these means every interface.
EVERYWHERE = frozenset({"0.0.0.0", "::", "[::]", ""})
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def client_url(host: str, port: int) -> str:
    """The URL a client on this machine uses to reach a server bound to ``host:port``."""
    bare = host.strip("[]")
    if host in EVERYWHERE:
        bare = "::1" if host in ("::", "[::]") else "127.0.0.1"
    shown = f"[{bare}]" if ":" in bare else bare
    return f"http://{shown}:{port}"


def served_hosts(host: str, port: int, settings: ServerSettings) -> list[str]:
    """The ``Host`` values the server bound to ``host:port`` answers: ``allowed_hosts``, the
    address bound, and on loopback or every interface ``127.0.0.1``, ``localhost`` and
    ``[::1]``, each with the port. A page on any other name that reaches the server is one
    whose DNS answer was rebound to it. Bound to every interface (which needs a password)
    with no ``allowed_hosts``: any."""
    configured = settings.allowed_hosts
    if host in EVERYWHERE:
        if not configured:
            return ["*"]
        names = set(LOOPBACK_NAMES)
    else:
        bound = f"[{host.strip('[]')}]" if ":" in host else host.lower()
        names = {*LOOPBACK_NAMES, bound} if is_loopback(host) else {bound}
    return [*configured, *(f"{name}:{port}" for name in sorted(names))]
