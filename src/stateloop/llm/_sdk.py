"""What both SDK-based adapters need around their clients: one client per event loop, a
stream whose failures come out as ``ModelError``, and telling network failures apart."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, TypeVar

from ..errors import ModelError
from .base import StreamItem

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


async def model_stream(open_stream: Callable[[], Awaitable[Any]],
                       read: Callable[[Any], AsyncIterator[StreamItem]],
                       model_error: Callable[[BaseException, bool], ModelError | None],
                       ) -> AsyncIterator[StreamItem]:
    """``read`` the SDK stream ``open_stream`` returns; what fails becomes the ModelError
    ``model_error`` makes of it (told whether the stream had opened), else goes on as is."""
    opened = False
    try:
        events = await open_stream()
        opened = True
        async for item in read(events):
            yield item
    except ModelError:
        raise
    except Exception as exc:
        error = model_error(exc, opened)
        if error is None:
            raise
        raise error from exc
