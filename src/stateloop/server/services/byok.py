"""Providers added over ``/v1/providers``: their keys sealed with the operator's key
(``STATELOOP_ENCRYPTION_KEY``, Fernet), the lookup through which their handles resolve on
every process (read from the database on each call), and their model listings, kept a
while."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx2
from cryptography.fernet import Fernet, InvalidToken

from ...addresses import DEFAULT_PORTS, RefusedAddress, public_address
from ...errors import AuthenticationError, InvalidRequest
from ...llm.listing import UNLISTED, Listed, ListingError, list_provider
from ...llm.providers import CATALOGUE
from ...llm.registered import Registered
from ...llm.registry import PROVIDERS
from ...store.providers import ProviderRecord
from ..settings import ServerSettings

if TYPE_CHECKING:
    from ...store.sql import SqlStore

KEY_VARIABLE = "STATELOOP_ENCRYPTION_KEY"
LISTING_TTL = 300.0  # seconds a provider's model listing is kept
LISTING_WAIT = 2.0  # seconds a request waits for listings not read yet
LISTING_TIMEOUT = 8.0  # seconds one listing may take

logger = logging.getLogger("stateloop.server")


class KeyUnavailable(Exception):
    """No usable encryption key: the words name the setting."""


class KeyBox:
    """Seals and opens provider keys with the operator's Fernet key."""

    def __init__(self, settings: ServerSettings) -> None:
        self._fernet: Fernet | None = None
        self.problem: str | None = None
        key = settings.encryption_key
        if key is None and settings.encryption_key_file:
            try:
                key = Path(settings.encryption_key_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                self.problem = (f"{KEY_VARIABLE}_FILE cannot be read: "
                                f"{exc.strerror or type(exc).__name__}")
                return
        if not key:
            self.problem = (f"set {KEY_VARIABLE} (or {KEY_VARIABLE}_FILE) to a Fernet key to "
                            "store provider keys (encrypted at rest)")
            return
        try:
            self._fernet = Fernet(key.encode())
        except ValueError:
            self.problem = (f"{KEY_VARIABLE} is not a Fernet key (32 url-safe base64-encoded "
                            "bytes)")

    def seal(self, secret: str | None) -> str | None:
        if secret is None:
            return None
        if self._fernet is None:
            raise KeyUnavailable(self.problem)
        return self._fernet.encrypt(secret.encode()).decode()

    def open(self, sealed: str | None) -> str | None:
        if sealed is None:
            return None
        if self._fernet is None:
            raise KeyUnavailable(self.problem)
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken:
            raise KeyUnavailable(f"a provider key was sealed with another {KEY_VARIABLE}"
                                 ) from None


class ProviderBook:
    """The ``Lookup`` of providers added over REST: ``known`` from the names last read
    (``refresh``) and those since deleted (so their agents still load, and their calls say
    the provider is gone), ``find`` from the database each time."""

    def __init__(self, store: SqlStore, box: KeyBox, *, private_ok: bool = False) -> None:
        self._store = store
        self.box = box
        self.private_ok = private_ok  # STATELOOP_PROVIDER_PRIVATE_URLS
        self._names: dict[str, str] = {}  # name -> provider type, as last read
        self._gone: dict[str, str] = {}  # those since deleted
        # name -> (the record's updated_at, when read, its models)
        self._listed: dict[str, tuple[float, float, list[Listed]]] = {}
        self._listing: dict[str, asyncio.Task[None]] = {}

    def known(self, name: str) -> bool:
        return name in self._names or name in self._gone

    def provider_type(self, name: str) -> str | None:
        return self._names.get(name) or self._gone.get(name)

    def deleted(self, name: str) -> bool:
        """Whether a provider of this name was deleted (and none added since)."""
        return name in self._gone and name not in self._names

    async def refresh(self) -> None:
        """Read the names again (a provider added on another process becomes known)."""
        names = {p.name: p.provider_type for p in await self._store.list_providers()}
        gone = {**self._gone, **self._names}
        self._gone = {name: kind for name, kind in gone.items() if name not in names}
        self._names = names

    async def refresh_for(self, *handles: str | None) -> None:
        """``refresh`` (once) when a handle may name a provider added over REST; handles of
        the catalogue's or built-in providers need no read."""
        prefixes = {(handle or "").partition("/")[0] for handle in handles} - {""}
        if any(p not in CATALOGUE and p not in PROVIDERS for p in prefixes):
            await self.refresh()

    def remember(self, record: ProviderRecord, present: bool) -> None:
        if present:
            self._names[record.name] = record.provider_type
            self._gone.pop(record.name, None)
        else:
            self._names.pop(record.name, None)
            self._gone[record.name] = record.provider_type

    async def find(self, name: str) -> Registered | None:
        record = await self._store.find_provider(name)
        if record is None:
            return None
        if record.base_url and not self.private_ok:
            await _public(record)  # its name may point elsewhere since it was added
        try:
            return self.registered(record)
        except KeyUnavailable as exc:  # the operator's key changed, or is gone
            raise AuthenticationError(f"the key of provider {name!r} cannot be read: {exc}",
                                      provider=name) from None

    def registered(self, record: ProviderRecord) -> Registered:
        return Registered(record.provider_type, record.base_url,
                          self.box.open(record.api_key_sealed), record.api_version)

    async def models(self, records: list[ProviderRecord]) -> dict[str, list[Listed]]:
        """Each provider's models from its own listing: those read within ``LISTING_TTL``
        (and since it last changed), the others read now, waiting ``LISTING_WAIT`` at most
        (a slow one shows on a later request; one that fails lists nothing)."""
        now = time.monotonic()
        stale = [r for r in records if r.name not in self._listing and (
            (kept := self._listed.get(r.name)) is None or kept[0] != r.updated_at
            or now - kept[1] > LISTING_TTL)]
        for record in stale:
            task = asyncio.create_task(self._list(record))
            self._listing[record.name] = task
            task.add_done_callback(functools.partial(self._done, record.name))
        waiting = [self._listing[r.name] for r in records if r.name in self._listing]
        if waiting:
            await asyncio.wait(waiting, timeout=LISTING_WAIT)
        return {r.name: self._listed[r.name][2] for r in records if r.name in self._listed}

    def _done(self, name: str, task: asyncio.Task[None]) -> None:
        self._listing.pop(name, None)

    async def relist(self, record: ProviderRecord) -> None:
        """Read the provider's listing now (one that fails lists nothing)."""
        await self._list(record)

    async def _list(self, record: ProviderRecord) -> None:
        kind = CATALOGUE[record.provider_type]
        models: list[Listed] = []
        try:
            if kind.name not in UNLISTED:
                models = await list_provider(kind, self.registered(record).environment(),
                                             timeout=LISTING_TIMEOUT)
        except (ListingError, KeyUnavailable, OSError) as exc:
            logger.warning("the model listing of provider %s failed: %s", record.name,
                           type(exc).__name__ if isinstance(exc, KeyUnavailable) else exc)
        self._listed[record.name] = (record.updated_at, time.monotonic(), models)


async def _public(record: ProviderRecord) -> None:
    """``InvalidRequest`` when the provider's host has a loopback, private or link-local
    address now (one that resolves nowhere is left to fail when called)."""
    url = urlsplit(record.base_url or "")
    try:
        await public_address(url.hostname or "", url.port or DEFAULT_PORTS.get(url.scheme, 443))
    except RefusedAddress as exc:
        raise InvalidRequest(f"provider {record.name!r}: base_url: {exc}, which providers may "
                             "use only when STATELOOP_PROVIDER_PRIVATE_URLS=1 allows it",
                             provider=record.name) from None
    except httpx2.ConnectError:
        pass
