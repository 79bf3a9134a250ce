"""What both SDK-based adapters need around their clients: one client per event loop, and
telling network failures apart from everything else."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

Client = TypeVar("Client")


class ClientPerLoop(Generic[Client]):
    """Makes the SDK client lazily and again for each event loop.

    ``run_sync`` starts a fresh loop per call, and a pooled HTTP connection must not outlive
    the loop it was opened in.
    """

    def __init__(self, factory: Callable[[], Client]) -> None:
        self._factory = factory
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._client: Client | None = None

    def get(self) -> Client:
        """The client for the running loop, made on first use (so key errors surface then)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is None or self._loop() is not loop:
            self._client = self._factory()
            self._loop = weakref.ref(loop)
        return self._client


def is_transport_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a network failure raised by httpx (or httpx2) while reading a stream.

    The SDKs let these escape from stream iteration unwrapped, and which httpx package they
    use depends on their version, so the class is recognised by name.
    """
    return any(cls.__name__ == "TransportError" and cls.__module__.startswith("httpx")
               for cls in type(exc).__mro__)
