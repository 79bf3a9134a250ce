"""What a provider added over REST must be: Letta's request bodies with bounded fields, a
name of its own, a type the catalogue serves, a ``base_url`` the server may call, and a key
its provider accepts (``check``)."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

import httpx2
from fastapi import HTTPException
from pydantic import BaseModel, ConfigDict, Field

from ...addresses import DEFAULT_PORTS, RefusedAddress, public_address
from ...llm import registered
from ...llm.listing import ListingError, check_key
from ...llm.providers import CATALOGUE, served
from ...llm.registry import PROVIDERS
from .agent_fields import unprocessable

CHECK_TIMEOUT = 10.0  # seconds a key check may take in all
MAX_PROVIDERS = 200  # providers added over REST, at most (each is listed on /v1/models)
RESERVED = frozenset({*CATALOGUE, *PROVIDERS, "letta"})  # handle prefixes taken already

Name = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
MAX_KEY = 4096  # characters of a key; checked by ``check_keys``, whose errors never quote it
Url = Annotated[str, Field(max_length=2048)]
Short = Annotated[str, Field(max_length=200)]


_VISIBLE = re.compile(r"[!-~]*")


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")  # Letta Code also sends ``profile``


class ProviderCheck(_Body):
    """Letta's ``ProviderCheck``: a key to try, nothing stored."""
    provider_type: Short
    api_key: str
    access_key: str | None = None
    region: Short | None = None
    base_url: Url | None = None
    api_version: Short | None = None


class ProviderCreate(ProviderCheck):
    """Letta's ``ProviderCreate``."""
    name: Name


class ProviderUpdate(_Body):
    """Letta's ``ProviderUpdate``: the key, and what else is given."""
    api_key: str
    access_key: str | None = None
    region: Short | None = None
    base_url: Url | None = None
    api_version: Short | None = None


def check_keys(*keys: tuple[str, str | None]) -> None:
    """422 for a key over ``MAX_KEY`` characters or not of visible ASCII (it goes in a
    header), naming the field and never quoting the key."""
    for field, key in keys:
        if key is not None and (len(key) > MAX_KEY or not _VISIBLE.fullmatch(key)):
            raise unprocessable(field, f"must be at most {MAX_KEY} visible ASCII characters")


def check_name(name: str, base: list[str]) -> None:
    """409 for a name that is a catalogue prefix or an operator's provider."""
    if name in RESERVED or name in base:
        raise HTTPException(409, detail=f"name {name!r} is taken by a provider the server "
                                        "serves already; choose another (its models are "
                                        "NAME/MODEL)")


def check_type(provider_type: str) -> None:
    """422 for a type the catalogue does not serve, naming why."""
    kind = CATALOGUE.get(provider_type)
    if kind is None or provider_type not in served():
        why = kind.not_served if kind and kind.not_served else "not a provider type with chat "
        raise unprocessable("provider_type", f"{provider_type!r}: {why}"
                            f"{'' if kind and kind.not_served else 'models here'}"
                            f"; one of {', '.join(served())}")


async def check_url(base_url: str | None, private_ok: bool) -> None:
    """422 for a URL that is not http(s); 403 for one whose host has a loopback, private or
    link-local address, unless ``STATELOOP_PROVIDER_PRIVATE_URLS=1``."""
    if not base_url:
        return
    try:
        url = urlsplit(base_url)
        port = url.port or DEFAULT_PORTS[url.scheme]
    except (ValueError, KeyError):
        raise unprocessable("base_url", "must be an http:// or https:// URL") from None
    if not url.hostname:
        raise unprocessable("base_url", "has no host")
    if private_ok:
        return
    try:
        await public_address(url.hostname, port)
    except RefusedAddress as exc:
        raise HTTPException(403, detail=f"base_url: {exc}, which providers may use only when "
                                        "STATELOOP_PROVIDER_PRIVATE_URLS=1 allows it") from None
    except httpx2.ConnectError:
        raise unprocessable("base_url", f"host {url.hostname!r} does not resolve") from None


async def check_listing(provider_type: str, base_url: str | None, api_key: str | None,
                        api_version: str | None) -> None:
    """Read the provider's listing with the key: 401 when refused, 502 when unreachable."""
    found = registered.Registered(provider_type, base_url, api_key, api_version)
    kind = CATALOGUE[provider_type]
    problem = kind.missing(found.environment())
    if problem is not None:
        raise HTTPException(400, detail=f"provider_type {provider_type!r} needs "
                                        f"{'base_url' if not kind.base_url else 'api_key'}")
    try:
        await check_key(kind, found.environment(), timeout=CHECK_TIMEOUT)
    except ListingError as exc:
        refused = {"HTTP 401", "HTTP 403"} | ({"HTTP 400"} if kind.wire == "gemini" else set())
        if str(exc) in refused:  # Gemini answers a wrong key with a 400
            raise HTTPException(401, detail=f"Invalid api key for provider_type={provider_type}"
                                ) from None
        raise HTTPException(502, detail=f"the provider could not be reached: {exc}") from None
