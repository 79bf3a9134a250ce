"""``/v1/providers``: the model providers the server calls, in Letta's shape.

Those the operator configured (``OPENAI_*``, ``GROQ_API_KEY``, ...) are Letta's ``base``
category, read-only. Those added here are ``byok``: stored in the database with their keys
sealed by the operator's ``STATELOOP_ENCRYPTION_KEY``, their models usable as
``NAME/MODEL`` on every process at once. Keys are never returned, logged or echoed.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import JSONResponse

from ...store.providers import ProviderRecord
from ..deps import RuntimeDep
from ..models.requests import errors
from ..models.responses import Provider
from ..pagination import Limit, Order
from ..services.byok import KeyUnavailable
from ..services.provider_checks import (
    MAX_PROVIDERS,
    ProviderCheck,
    ProviderCreate,
    ProviderUpdate,
    check_keys,
    check_listing,
    check_name,
    check_type,
    check_url,
)
from .catalog import list_models

router = APIRouter(prefix="/v1/providers", tags=["providers"])

_IDS = uuid.UUID("6f1d3c2e-3a53-4f0e-9a8e-5b2f4d0c7a19")  # namespace of the stable ids


async def _base(runtime: RuntimeDep) -> list[dict[str, Any]]:
    """The operator's providers: those of the models ``/v1/models`` lists, by name."""
    found: dict[str, dict[str, Any]] = {}
    for model in await list_models(runtime, provider_category=["base"]):
        provider = model["provider_name"]
        found.setdefault(provider, {
            "id": f"provider-{uuid.uuid5(_IDS, provider)}", "name": provider,
            "provider_type": model["provider_type"], "provider_category": "base"})
    return list(found.values())


def _shown(record: ProviderRecord) -> dict[str, Any]:
    """A provider as clients see it: never its keys."""
    updated = datetime.fromtimestamp(record.updated_at, UTC).isoformat()
    return {"id": record.id, "name": record.name, "provider_type": record.provider_type,
            "provider_category": "byok", "base_url": record.base_url, "region": record.region,
            "api_version": record.api_version, "updated_at": updated, "last_synced": updated}


async def _own(runtime: RuntimeDep, provider_id: str, doing: str) -> ProviderRecord:
    """The provider added here with this id; 400 for an operator's provider."""
    if any(p["id"] == provider_id for p in await _base(runtime)):
        raise HTTPException(400, detail=f"provider {provider_id!r} is configured by the "
                                        f"server's environment (base): it cannot be {doing} "
                                        "over the API")
    return await runtime.store.get_provider(provider_id)


def _seal(runtime: RuntimeDep, secret: str | None) -> str | None:
    try:
        return runtime.providers.box.seal(secret or None)
    except KeyUnavailable as exc:
        raise HTTPException(400, detail=f"provider keys cannot be stored: {exc}") from None


@router.get("", response_model=list[Provider])
async def list_providers(runtime: RuntimeDep, name: str | None = None,
                         provider_type: str | None = None,
                         provider_category: Annotated[list[str] | None, Query()] = None,
                         limit: Limit = 50, order: Order = "desc",
                         order_by: Literal["created_at"] = "created_at",
                         before: str | None = None,
                         after: str | None = None) -> list[dict[str, Any]]:
    """The operator's providers (``base``) and those added here (``byok``) by creation, as
    Letta sorts them: newest first, or oldest with ``order=asc``. The operator's come before
    any added here (by name among themselves); ``before``/``after`` are ids of this list."""
    await runtime.providers.refresh()
    base = sorted(await _base(runtime), key=lambda p: p["name"])
    providers = [*base, *(_shown(r) for r in await runtime.store.list_providers())]
    if order == "desc":
        providers.reverse()
    providers = [p for p in providers if name in (None, p["name"])
                 and provider_type in (None, p["provider_type"])
                 and (not provider_category or p["provider_category"] in provider_category)]
    ids = [p["id"] for p in providers]
    if after in ids:
        providers = providers[ids.index(after) + 1:]
    if before in ids:
        providers = providers[:[p["id"] for p in providers].index(before)]
    return providers[:limit]


@router.post("", response_model=Provider, responses=errors(400, 403, 409))
async def create_provider(body: ProviderCreate, runtime: RuntimeDep) -> dict[str, Any]:
    """Add a provider; its models are ``NAME/MODEL`` at once, on every process. The key is
    stored sealed with ``STATELOOP_ENCRYPTION_KEY`` (without it, a key is refused)."""
    check_keys(("api_key", body.api_key), ("access_key", body.access_key))
    check_name(body.name, [p["name"] for p in await _base(runtime)])
    check_type(body.provider_type)
    await check_url(body.base_url, runtime.settings.provider_private_urls)
    if len(await runtime.store.list_providers()) >= MAX_PROVIDERS:
        raise HTTPException(400, detail=f"at most {MAX_PROVIDERS} providers may be added; "
                                        "delete one first")
    record = ProviderRecord(body.name, body.provider_type, body.base_url or None, body.region,
                            body.api_version, _seal(runtime, body.api_key),
                            _seal(runtime, body.access_key))
    await runtime.store.create_provider(record)
    runtime.providers.remember(record, True)
    return _shown(record)


@router.post("/check", responses=errors(400, 401, 403, 502))
async def check_provider(body: ProviderCheck, runtime: RuntimeDep) -> JSONResponse:
    """Whether the key opens the provider: its model listing read with it (nothing stored)."""
    check_keys(("api_key", body.api_key), ("access_key", body.access_key))
    check_type(body.provider_type)
    await check_url(body.base_url, runtime.settings.provider_private_urls)
    await check_listing(body.provider_type, body.base_url or None, body.api_key or None,
                        body.api_version)
    return JSONResponse({"message": f"Valid api key for provider_type={body.provider_type}"})


@router.get("/{provider_id}", response_model=Provider, responses=errors(404))
async def retrieve_provider(provider_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    for provider in await _base(runtime):
        if provider["id"] == provider_id:
            return provider
    return _shown(await runtime.store.get_provider(provider_id))


@router.patch("/{provider_id}", response_model=Provider, responses=errors(400, 403, 404))
async def modify_provider(provider_id: str, body: ProviderUpdate,
                          runtime: RuntimeDep) -> dict[str, Any]:
    """Replace a provider's key (and endpoint, region, API version when given)."""
    record = await _own(runtime, provider_id, "modified")
    check_keys(("api_key", body.api_key), ("access_key", body.access_key))
    fields = body.model_fields_set
    if "base_url" in fields:
        await check_url(body.base_url, runtime.settings.provider_private_urls)
        record.base_url = body.base_url or None
    for name in ("region", "api_version"):
        if name in fields:
            setattr(record, name, getattr(body, name))
    record.api_key_sealed = _seal(runtime, body.api_key)
    if "access_key" in fields:
        record.access_key_sealed = _seal(runtime, body.access_key)
    return _shown(await runtime.store.update_provider(record))


@router.delete("/{provider_id}", responses=errors(400, 404))
async def delete_provider(provider_id: str, runtime: RuntimeDep) -> JSONResponse:
    """Remove a provider; agents on its models fail their next call, naming the handle."""
    record = await _own(runtime, provider_id, "deleted")
    await runtime.store.delete_provider(record.id)
    runtime.providers.remember(record, False)
    return JSONResponse({"message": f"Provider id={provider_id} successfully deleted"})


@router.post("/{provider_id}/check", responses=errors(400, 401, 404, 502))
async def check_existing_provider(provider_id: str, runtime: RuntimeDep) -> JSONResponse:
    """Whether the stored key still opens the provider."""
    record = await _own(runtime, provider_id, "checked")
    await _check_stored(runtime, record)
    return JSONResponse({"message": f"Valid api key for provider_type={record.provider_type}"})


@router.patch("/{provider_id}/refresh", response_model=Provider,
              responses=errors(400, 401, 404, 502))
async def refresh_provider_models(provider_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Read the provider's model listing again (Letta refreshes ``byok`` providers only)."""
    record = await _own(runtime, provider_id, "refreshed")
    await _check_stored(runtime, record)
    await runtime.providers.relist(record)  # GET /v1/models shows what it lists now
    shown = _shown(record)
    shown["last_synced"] = datetime.fromtimestamp(time.time(), UTC).isoformat()
    return shown


async def _check_stored(runtime: RuntimeDep, record: ProviderRecord) -> None:
    try:
        found = runtime.providers.registered(record)
    except KeyUnavailable as exc:
        raise HTTPException(400, detail=f"the provider's key cannot be read: {exc}") from None
    await check_listing(found.provider_type, found.base_url, found.api_key, found.api_version)
