"""Model providers: OpenAI-compatible, Anthropic and a demo echo; their registry, retries
and token counts."""

from __future__ import annotations

from ._http import tls_context
from .tokens import DEFAULT_ENCODING, get_encoding


def prepare() -> None:
    """Load now what the first model call would load while it runs: the token counter's
    tables (half a second of CPU) and the TLS settings with their CA bundle. It blocks:
    a server calls it in a thread as it starts."""
    get_encoding(DEFAULT_ENCODING)
    tls_context()
