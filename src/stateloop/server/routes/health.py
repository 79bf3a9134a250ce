"""``/v1/health`` (open without credentials): the process answers. ``/v1/ready``: it can
serve, its database answering as the server's role.

Both report, in ``version`` (the field Letta's clients read and compare), the version of
Letta's API the server implements, and stateloop's own in ``stateloop_version``."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, HTTPException

from ... import __version__
from ...store import StoreError
from ..deps import RuntimeDep
from ..models.requests import errors
from ..models.responses import Health

router = APIRouter(tags=["health"])

READY_TIMEOUT = 10.0  # seconds the database has to answer a readiness check
LETTA_API_VERSION = "0.16.8"  # the Letta server whose REST API this one answers as
STATUS = {"status": "ok", "version": LETTA_API_VERSION, "stateloop_version": __version__}


@router.get("/v1/health", response_model=Health)
async def health() -> dict[str, str]:
    """The server is up."""
    return STATUS


@router.get("/v1/ready", response_model=Health, responses=errors(503))
async def ready(runtime: RuntimeDep) -> dict[str, str]:
    """The server can take requests: its database answers a query now (on PostgreSQL on a
    new connection as the server's role, which holds the rights the server uses); else 503
    naming the problem."""
    try:
        await asyncio.wait_for(runtime.store.check(), READY_TIMEOUT)
    except TimeoutError:
        raise HTTPException(503, detail=f"the database did not answer within "
                                        f"{READY_TIMEOUT:g} s") from None
    except StoreError as exc:
        raise HTTPException(503, detail=str(exc)) from None
    return STATUS
