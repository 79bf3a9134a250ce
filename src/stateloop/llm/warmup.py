"""What a process loads before its first model call, so that call does not load it while
it runs: the token counter's tables and the TLS settings with their CA bundle."""

from __future__ import annotations

from ._http import tls_context
from .tokens import DEFAULT_ENCODING, get_encoding


def prepare() -> None:
    """Load the token counter's tables (half a second of CPU) and the TLS settings. It
    blocks: a server calls it in a thread as it starts."""
    get_encoding(DEFAULT_ENCODING)
    tls_context()
