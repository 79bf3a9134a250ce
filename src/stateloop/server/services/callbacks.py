"""A run's ``callback_url``: POSTed Letta's payload once the run ends, from a task of its own.

As in Letta, the body is ``{"run_id", "status", "completed_at", "metadata"}`` with the run's
whole response under ``metadata.result`` (its messages, stop reason and usage), and the run
records when the callback was sent, the status code it got or the error that stopped it
(``callback_sent_at``, ``callback_status_code``, ``callback_error``). The run has ended
before the callback starts, so a slow or failing callback never holds or fails it; each
attempt is bounded by ``STATELOOP_CALLBACK_TIMEOUT``, redirects are not followed, and the
URL's host must be a public address unless ``STATELOOP_CALLBACK_PRIVATE_URLS`` allows
loopback, private and link-local ones (checked when the run is asked for, and again on
connecting, so a name that later resolves elsewhere reaches nothing new).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx2

from ...addresses import DEFAULT_PORTS, GuardedTransport, RefusedAddress, public_address
from ..models.responses import iso
from .agent_fields import unprocessable
from .messages import Frame
from .runs import RunChannel

if TYPE_CHECKING:
    from fastapi import HTTPException

    from ...store.sql import SqlStore

logger = logging.getLogger("stateloop.server")

CALLBACK_KEY = "callback"  # where a run's metadata keeps its callback (shown apart)
RESPONSE_BYTES = 64 * 1024  # what is read of a callback's response at most


async def check_callback_url(url: str, *, private_ok: bool) -> None:
    """A 422 naming ``callback_url`` for a URL that is not http(s) with a host, or whose
    host has a loopback, private or link-local address the operator did not allow (a name
    that resolves nowhere now is left to fail when it is called)."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
    except ValueError as exc:
        raise _refused(f"not a URL: {exc}") from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise _refused("must be an http:// or https:// URL with a host")
    if private_ok:
        return
    try:
        await public_address(parts.hostname, port)
    except RefusedAddress as exc:
        raise _refused(f"{exc}, which a callback may reach only when "
                       "STATELOOP_CALLBACK_PRIVATE_URLS=1 allows it") from None
    except httpx2.ConnectError:
        pass  # resolves nowhere now: checked again when it is called


def _refused(problem: str) -> HTTPException:
    return unprocessable("callback_url", f"callback_url {problem}")


def callback_fields(metadata: dict[str, Any]) -> dict[str, Any]:
    """Letta's ``callback_*`` fields of a run from its stored metadata."""
    stored = metadata.get(CALLBACK_KEY) or {}
    return {"callback_url": stored.get("url"),
            "callback_sent_at": iso(stored["sent_at"]) if stored.get("sent_at") else None,
            "callback_status_code": stored.get("status_code"),
            "callback_error": stored.get("error")}


class Callbacks:
    """The callbacks waiting for their runs to end, or being sent."""

    def __init__(self, store: SqlStore, *, timeout: float, private_ok: bool) -> None:
        self._store = store
        self._timeout = timeout
        self._private_ok = private_ok
        self._tasks: set[asyncio.Task[None]] = set()

    async def expect(self, channel: RunChannel, url: str) -> None:
        """Record ``url`` on the channel's run and call it once the run ends."""
        assert channel.run_id is not None
        run = await self._store.get_run(channel.run_id)
        await self._store.update_run(run.id, metadata={**run.metadata,
                                                       CALLBACK_KEY: {"url": url}})
        task = asyncio.create_task(self._send_after(channel, url))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_after(self, channel: RunChannel, url: str) -> None:
        run_id = channel.run_id
        assert run_id is not None
        try:
            result = await _result(channel)
            run = await self._store.get_run(run_id)
            metadata = {k: v for k, v in run.metadata.items()
                        if k not in (CALLBACK_KEY, "request_config")}
            payload = {"run_id": run_id, "status": run.status,
                       "completed_at": iso(run.completed_at),
                       "metadata": {**metadata, "result": result}}
            sent: dict[str, Any] = {"url": url, "sent_at": time.time()}
            sent.update(await self.post(url, payload, subject=f"run {run_id}"))
            run = await self._store.get_run(run_id)
            await self._store.update_run(run_id, metadata={**run.metadata, CALLBACK_KEY: sent})
        except Exception:  # the run has ended as it did; only its callback is lost
            logger.exception("the callback of run %s could not be sent or recorded", run_id)

    async def post(self, url: str, payload: dict[str, Any], *, subject: str
                   ) -> dict[str, Any]:
        """POST ``payload`` (about ``subject``, "run ..." or "batch ...") to ``url``:
        ``status_code`` of the answer, or ``error`` saying why there is none."""
        transport = GuardedTransport(public_only=not self._private_ok,
                                     max_bytes=RESPONSE_BYTES)
        try:
            async with httpx2.AsyncClient(transport=transport, timeout=self._timeout,
                                          follow_redirects=False) as client:
                # The whole exchange is bounded, not each read: a trickling answer ends too.
                async with asyncio.timeout(self._timeout):
                    response = await client.post(url, json=payload)
            return {"status_code": response.status_code}
        except (httpx2.HTTPError, TimeoutError, OSError) as exc:
            reason = (f"no answer within {self._timeout:g} s"
                      if isinstance(exc, (TimeoutError, httpx2.TimeoutException))
                      else str(exc) or type(exc).__name__)
            return {"error": f"Failed to dispatch callback for {subject} to "
                             f"{url}: {reason}"}

    async def close(self) -> None:
        """Stop the callbacks still waiting or being sent (server shutdown)."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


async def _result(channel: RunChannel) -> dict[str, Any]:
    """The run's ``LettaResponse``, read from its frames as it ends."""
    messages: list[Frame] = []
    stop: Frame = {"message_type": "stop_reason", "stop_reason": "error"}
    usage: Frame = {"message_type": "usage_statistics"}
    async for frame in channel.follow(0):
        kind = frame.get("message_type") if frame is not None else None
        if kind == "stop_reason":
            stop = frame  # type: ignore[assignment]
        elif kind == "usage_statistics":
            usage = frame  # type: ignore[assignment]
        elif kind is not None and kind != "error_message":
            messages.append(frame)  # type: ignore[arg-type]
    return {"messages": messages, "stop_reason": stop, "usage": usage}
