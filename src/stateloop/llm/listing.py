"""What the configured providers offer: each one's own model listing (``GET {base}/models``;
Anthropic's paged ``/v1/models``, Gemini's ``models``, an Azure resource's deployments), read
within bounds of time, size and count, and kept for a while by ``ModelListings`` so that a
request never waits for a provider.

Only the endpoints the operator configured are asked (``providers.CATALOGUE`` and the
environment); a provider that fails, hangs or answers garbage lists nothing and is logged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2
import orjson

from ._http import shared_client
from .models import DEFAULT_LIMITS, known_limits
from .providers import CATALOGUE, Endpoint, Environment, Provider

logger = logging.getLogger("stateloop.llm")

MAX_BYTES = 4 * 1024 * 1024  # a listing larger than this is refused (OpenRouter's is ~1 MiB)
MAX_MODELS = 2_000  # models kept from one provider
MAX_WINDOW = 10_000_000  # a context window above this is taken as garbage
TIMEOUT = 8.0  # seconds for one provider's listing, connecting included
MAX_PAGES = 20  # pages of a paged listing (Anthropic's) read at most
ANTHROPIC_PAGE = 1000  # models asked for a page (Anthropic's most)
UNLISTED = frozenset({"minimax"})  # providers with no model listing
ANTHROPIC_VERSION = "2023-06-01"
# Azure's deployment listing answers only this version (as Letta calls it).
AZURE_DEPLOYMENTS_VERSION = "2023-03-15-preview"
# OpenAI's own listing names every model it has; those an agent can chat with start so, and
# do not name a mode Chat Completions lacks (as Letta filters it).
OPENAI_CHAT = ("gpt-4", "gpt-5", "o1", "o3", "o4")
OPENAI_NOT_CHAT = ("transcribe", "search", "realtime", "tts", "audio", "computer", "o1-mini",
                   "o1-preview", "o1-pro")


@dataclass(frozen=True, slots=True)
class Listed:
    """One model a provider offers, in the terms of Letta's ``Model``/``EmbeddingModel``."""

    provider: str
    model: str
    context_window: int
    max_tokens: int | None
    embedding: bool
    endpoint: str | None  # the provider's public URL; None for one the operator set

    @property
    def handle(self) -> str:
        return f"{self.provider}/{self.model}"


class ListingError(Exception):
    """A provider's listing could not be had: the words say why."""


def listable(env: Environment | None = None) -> list[Provider]:
    """The configured providers whose models come from their own listing."""
    return [p for p in CATALOGUE.values() if p.wire in ("chat", "gemini", "anthropic")
            and p.name not in UNLISTED and p.missing(env) is None]


async def list_provider(provider: Provider, env: Environment | None = None, *,
                        timeout: float = TIMEOUT) -> list[Listed]:
    """``provider``'s models from its own listing; ``ListingError`` when it cannot be read."""
    where = provider.endpoint(env)
    try:
        async with asyncio.timeout(timeout):
            if provider.wire == "anthropic":
                return await _anthropic_models(provider, where)
            if provider.wire == "gemini":
                url = f"{where.base_url}/v1beta/models?pageSize=1000"
                headers = {"x-goog-api-key": where.api_key or ""}
            elif provider.name == "azure":  # its key in ``api-key``; a Bearer one is refused
                url = (f"{where.base_url.removesuffix('/openai/v1')}/openai/deployments"
                       f"?api-version={AZURE_DEPLOYMENTS_VERSION}")
                headers = {"api-key": where.api_key or ""}
            else:
                url = f"{where.base_url}/models"
                headers = {**where.headers, "authorization": f"Bearer {where.api_key or 'none'}"}
            body = await _get_json(url, headers)
    except TimeoutError as exc:
        raise ListingError(f"no answer within {timeout:g} s") from exc
    except httpx2.HTTPError as exc:
        raise ListingError(f"{type(exc).__name__}: {exc}") from exc
    if provider.wire == "gemini":
        return _gemini_models(provider, where, body)
    if provider.name == "azure":
        return _azure_models(provider, where, body)
    return _openai_models(provider, where, body)


async def check_key(provider: Provider, env: Environment, *, timeout: float = TIMEOUT) -> None:
    """Whether ``provider``'s key (in ``env``) opens it: its model listing read with it;
    ``ListingError`` (``HTTP 401``, ...) when it does not."""
    await list_provider(provider, env, timeout=timeout)


async def _get_json(url: str, headers: dict[str, str]) -> Any:
    raw = await _get(url, headers)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ListingError(f"the listing is not JSON: {exc}") from exc


async def _get(url: str, headers: dict[str, str]) -> bytes:
    client = await shared_client()
    request = client.build_request("GET", url, headers={**headers, "accept": "application/json"})
    response = await client.send(request, stream=True)
    try:
        if response.status_code >= 400:
            raise ListingError(f"HTTP {response.status_code}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_BYTES:
                raise ListingError(f"the listing is larger than {MAX_BYTES} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        await response.aclose()


def _openai_models(provider: Provider, where: Endpoint, body: Any) -> list[Listed]:
    # OpenAI's shape is {"data": [...]}; Together answers the list itself.
    entries = body.get("data") if isinstance(body, dict) else body
    if not isinstance(entries, list):
        raise ListingError("the listing has no list of models")
    found = []
    for entry in entries[:MAX_MODELS]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        name = entry["id"][:200]
        if (provider.name == "openai" and where.public and "embed" not in name
                and (not name.startswith(OPENAI_CHAT) or any(w in name for w in OPENAI_NOT_CHAT))):
            continue
        own = next((entry[key] for key in ("context_window", "context_length", "max_model_len",
                                           "max_context_length") if key in entry), None)
        kind = str(entry.get("type") or "")
        embedding = kind == "embedding" or "embed" in name.lower()
        found.append(_listed(provider, where, name, own, embedding))
    return found


async def _anthropic_models(provider: Provider, where: Endpoint) -> list[Listed]:
    """Anthropic's ``GET /v1/models``, page after page (``has_more``, ``after_id``)."""
    headers = {"x-api-key": where.api_key or "", "anthropic-version": ANTHROPIC_VERSION}
    found: list[Listed] = []
    seen: set[str] = set()
    after = ""
    for _ in range(MAX_PAGES):
        query = f"?limit={ANTHROPIC_PAGE}" + (f"&after_id={quote(after)}" if after else "")
        body = await _get_json(f"{where.base_url}/v1/models{query}", headers)
        entries = body.get("data") if isinstance(body, dict) else None
        if not isinstance(entries, list):
            raise ListingError("the listing has no list of models")
        for entry in entries:
            if (isinstance(entry, dict) and entry.get("type", "model") == "model"
                    and isinstance(entry.get("id"), str) and entry["id"] not in seen
                    and not entry["id"].startswith("claude-2")):  # no tool calls
                seen.add(entry["id"])
                found.append(_listed(provider, where, entry["id"][:200],
                                     entry.get("context_window"), False))
        last = str(body.get("last_id") or "")[:200]
        if not body.get("has_more") or last in ("", after) or len(found) >= MAX_MODELS:
            break  # the last page, or one that would be asked for again
        after = last
    return found[:MAX_MODELS]


def _azure_models(provider: Provider, where: Endpoint, body: Any) -> list[Listed]:
    # A handle names a deployment (``azure/DEPLOYMENT``); its limits are its model's.
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise ListingError("the listing has no list of deployments")
    found = []
    for entry in entries[:MAX_MODELS]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        if entry.get("status") not in (None, "succeeded"):
            continue  # still being made, or failed
        model = str(entry.get("model") or entry["id"])
        limits = known_limits(model) or DEFAULT_LIMITS
        found.append(Listed(provider.name, entry["id"][:200], limits.context_window,
                            limits.max_output_tokens, "embed" in model.lower(), None))
    return found


def _gemini_models(provider: Provider, where: Endpoint, body: Any) -> list[Listed]:
    entries = body.get("models") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise ListingError("the listing has no list of models")
    found = []
    for entry in entries[:MAX_MODELS]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        methods = entry.get("supportedGenerationMethods") or ()
        embedding = "embedContent" in methods
        if not embedding and "generateContent" not in methods:
            continue
        name = entry["name"].removeprefix("models/")[:200]
        found.append(_listed(provider, where, name, entry.get("inputTokenLimit"), embedding,
                             entry.get("outputTokenLimit")))
    return found


def _listed(provider: Provider, where: Endpoint, name: str, window: Any, embedding: bool,
            max_tokens: Any = None) -> Listed:
    limits = known_limits(name) or DEFAULT_LIMITS
    if not _count(window):
        window = limits.context_window
    if not _count(max_tokens):
        max_tokens = limits.max_output_tokens
    return Listed(provider.name, name, int(window), int(max_tokens), embedding,
                  where.base_url if where.public else None)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_WINDOW


async def list_all(env: Environment | None = None, *, timeout: float = TIMEOUT
                   ) -> tuple[list[Listed], dict[str, str]]:
    """Every configured provider's models, and why each provider that failed did."""
    env = dict(os.environ) if env is None else env
    found: dict[str, list[Listed]] = {}
    failures: dict[str, str] = {}
    await asyncio.gather(*(_list_into(p, env, timeout, found, failures) for p in listable(env)))
    return [model for models in found.values() for model in models], failures


async def _list_into(provider: Provider, env: Environment, timeout: float,
                     found: dict[str, list[Listed]], failures: dict[str, str]) -> None:
    """List ``provider`` into ``found``, or say why not in ``failures``."""
    try:
        found[provider.name] = await list_provider(provider, env, timeout=timeout)
        failures.pop(provider.name, None)
    except (ListingError, httpx2.HTTPError, OSError) as exc:
        found.pop(provider.name, None)
        failures[provider.name] = str(exc) or type(exc).__name__
        logger.warning("the model listing of %s failed: %s", provider.name,
                       failures[provider.name])


class ModelListings:
    """The listings of the configured providers (the environment, with ``overrides`` over
    it), refreshed in the background once older than ``ttl`` seconds. The first ``current``
    waits at most ``wait`` seconds for the first refresh; later ones answer at once with what
    is known (each provider's models show as soon as its own listing is read)."""

    def __init__(self, *, ttl: float = 300.0, wait: float = 2.0, timeout: float = TIMEOUT,
                 overrides: Environment | None = None) -> None:
        self.ttl, self.wait, self.timeout = ttl, wait, timeout
        self.overrides = dict(overrides or {})  # variables over the environment's
        self._found: dict[str, list[Listed]] = {}
        self._failures: dict[str, str] = {}
        self._at = float("-inf")
        self._refreshing: asyncio.Task[None] | None = None
        self._waited = False

    async def current(self) -> list[Listed]:
        """The models known now, after starting a refresh if they are old."""
        if time.monotonic() - self._at > self.ttl and self._refreshing is None:
            self._refreshing = asyncio.create_task(self._refresh())
        if self._refreshing is not None and not self._waited:
            # A slow provider holds the first request back by ``wait`` at most; its models
            # show later.
            self._waited = True
            await asyncio.wait({self._refreshing}, timeout=self.wait)
        return [model for models in list(self._found.values()) for model in models]

    @property
    def failures(self) -> dict[str, str]:
        """Why each provider that failed at the last refresh did."""
        return dict(self._failures)

    async def _refresh(self) -> None:
        env = {**os.environ, **self.overrides}
        providers = listable(env)
        try:
            for gone in set(self._found).difference(p.name for p in providers):
                del self._found[gone]  # no longer configured
            await asyncio.gather(*(_list_into(p, env, self.timeout, self._found,
                                              self._failures) for p in providers))
        except Exception:  # never a failed request for a listing; logged, tried again later
            logger.exception("listing the providers' models failed")
        finally:
            self._at = time.monotonic()
            self._refreshing = None

    async def close(self) -> None:
        """Stop a refresh under way."""
        task = self._refreshing
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
