"""``/v1/health``: open without credentials."""

from __future__ import annotations

from fastapi import APIRouter

from ... import __version__
from ..responses import Health

router = APIRouter(tags=["health"])


@router.get("/v1/health", response_model=Health)
async def health() -> dict[str, str]:
    """The server is up."""
    return {"status": "ok", "version": __version__}
