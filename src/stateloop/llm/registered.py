"""Models of providers added at run time (Letta's ``byok`` providers): a handle
``NAME/MODEL`` whose provider is looked up anew on each call, so a provider added, changed or
removed anywhere is seen at once, and called through the catalogue adapter of its type (whose
Letta endpoint type the handle reports).

The server installs a ``Lookup`` (``use``); without one, no such handle resolves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import InvalidRequest
from . import providers
from .base import ModelRequest, StreamItem
from .models import model_limits


@dataclass(frozen=True, slots=True)
class Registered:
    """A provider as a call needs it: its catalogue type, endpoint and key in clear."""

    provider_type: str
    base_url: str | None = None
    api_key: str | None = None
    api_version: str | None = None

    def environment(self) -> dict[str, str]:
        """The variables of its catalogue type, as if the operator had set them."""
        kind = providers.CATALOGUE[self.provider_type]
        env: dict[str, str] = {}
        if kind.key_env and self.api_key:
            env[kind.key_env] = self.api_key
        if kind.base_env and self.base_url:
            env[kind.base_env] = self.base_url
        if self.api_version:
            env["AZURE_API_VERSION"] = self.api_version
        return env


class Lookup(Protocol):
    """Where providers added at run time are found."""

    def known(self, name: str) -> bool:
        """Whether a provider of this name was there when last looked (no I/O)."""
        ...

    def provider_type(self, name: str) -> str | None:
        """The catalogue type of the provider of this name when last looked (no I/O)."""
        ...

    async def find(self, name: str) -> Registered | None:
        """The provider named ``name`` now, or None."""
        ...


_lookup: Lookup | None = None


def use(lookup: Lookup | None) -> Lookup | None:
    """Resolve handles of providers added at run time through ``lookup`` (None: none);
    returns the lookup used until now."""
    global _lookup
    previous, _lookup = _lookup, lookup
    return previous


def provider_type(name: str) -> str | None:
    """The catalogue type of the provider added at run time named ``name``, or None."""
    return None if _lookup is None else _lookup.provider_type(name)


def endpoint_type(handle: str) -> str:
    """Letta's ``model_endpoint_type`` of the model ``handle`` names: its provider's, or that
    of its type for a provider added at run time."""
    prefix = handle.partition("/")[0] if "/" in handle else "openai"
    kind = prefix if prefix in providers.CATALOGUE else provider_type(prefix) or "openai"
    return providers.endpoint_type(kind)


async def find(name: str) -> Registered | None:
    """The provider added at run time named ``name`` now, or None."""
    return None if _lookup is None else await _lookup.find(name)


def resolve(prefix: str, name: str, **options: Any) -> RegisteredModel | None:
    """The model of handle ``prefix/name`` when ``prefix`` names a provider added at run
    time, else None."""
    if _lookup is None or not _lookup.known(prefix):
        return None
    return RegisteredModel(_lookup, prefix, name, **options)


class RegisteredModel:
    """A model of a provider added at run time; each call finds the provider again."""

    def __init__(self, lookup: Lookup, provider: str, name: str, *,
                 context_window: int | None = None, max_output_tokens: int | None = None,
                 **options: Any) -> None:
        self._lookup = lookup
        self.provider = provider
        self.model_id = name
        self.name = f"{provider}/{name}"
        limits = model_limits(name, context_window=context_window,
                              max_output_tokens=max_output_tokens)
        self.context_window = limits.context_window
        self.max_output_tokens: int | None = limits.max_output_tokens
        self._options = {k: v for k, v in options.items() if k not in ("base_url", "api_key")}

    def __repr__(self) -> str:
        return f"RegisteredModel({self.name!r})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        found = await self._lookup.find(self.provider)
        if found is None:
            raise InvalidRequest(f"model {self.name!r} cannot be called: its provider "
                                 f"{self.provider!r} was deleted", provider=self.provider)
        model = providers.chat_model(found.provider_type, self.model_id,
                                     env=found.environment(),
                                     context_window=self.context_window,
                                     max_output_tokens=self.max_output_tokens, **self._options)
        async for item in model.stream(request):
            yield item
