"""``/v1/providers``: the model providers the server calls, read-only, in Letta's shape.

They are the operator's (``OPENAI_*``, ``ANTHROPIC_*`` settings), Letta's ``base`` category:
listed with neither key nor endpoint, so a client learns which providers there are and
nothing it could call them with. Users do not bring their own (``byok``) here.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter

from ..deps import RuntimeDep
from ..models.responses import Provider
from ..pagination import Limit, Order
from .catalog import list_models

router = APIRouter(prefix="/v1/providers", tags=["providers"])

_IDS = uuid.UUID("6f1d3c2e-3a53-4f0e-9a8e-5b2f4d0c7a19")  # namespace of the stable ids


@router.get("", response_model=list[Provider])
async def list_providers(runtime: RuntimeDep, name: str | None = None,
                         provider_type: str | None = None, limit: Limit = 50,
                         order: Order = "desc", before: str | None = None,
                         after: str | None = None) -> list[dict[str, Any]]:
    """The providers of the models ``/v1/models`` lists, by name; each has a stable id.
    ``before``/``after`` are ids of this list."""
    found: dict[str, dict[str, Any]] = {}
    for model in await list_models(runtime):
        provider = model["provider_name"]
        found.setdefault(provider, {
            "id": f"provider-{uuid.uuid5(_IDS, provider)}", "name": provider,
            "provider_type": model["provider_type"], "provider_category": "base"})
    providers = sorted(found.values(), key=lambda p: p["name"], reverse=order == "desc")
    providers = [p for p in providers if name in (None, p["name"])
                 and provider_type in (None, p["provider_type"])]
    ids = [p["id"] for p in providers]
    if after in ids:
        providers = providers[ids.index(after) + 1:]
    if before in ids:
        providers = providers[:[p["id"] for p in providers].index(before)]
    return providers[:limit]
