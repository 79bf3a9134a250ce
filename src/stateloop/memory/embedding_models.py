"""Which embedder serves an agent, archive or folder: Letta's ``EmbeddingConfig`` for a
handle (``"openai/text-embedding-3-small"``, ``"ollama/nomic-embed-text"``) or a config, and
``Embedders``, which turns one into an embedder (``embeddings.py``'s MiniLM, the
OpenAI-compatible endpoint of a configured provider or Gemini's, or a provider added at run
time, found again on each call), made once a model, or says which setting is missing."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stateloop.errors import ConfigError
from stateloop.llm import registered
from stateloop.llm.providers import CATALOGUE, Environment, Provider, azure_url, endpoint_type
from stateloop.memory.embeddings import (
    Embedder,
    EmbeddingError,
    EmbeddingUnavailable,
    GeminiEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    default_embedder,
)

if TYPE_CHECKING:
    import numpy as np

DEFAULT_CHUNK_SIZE = 300  # Letta's DEFAULT_EMBEDDING_CHUNK_SIZE
DEFAULT_BATCH_SIZE = 32  # Letta's EmbeddingConfig.batch_size
OPENAI_URL = "https://api.openai.com/v1"
# OpenAI's embedding models and their native sizes; another model's size is measured.
OPENAI_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072,
               "text-embedding-ada-002": 1536}
_RESIZABLE = ("text-embedding-3-small", "text-embedding-3-large")  # take ``dimensions``
MINILM_HANDLE = f"hugging-face/{MiniLMEmbedder.MODEL}"
_MINILM_NAMES = {MiniLMEmbedder.MODEL, "all-MiniLM-L6-v2", "minilm"}
_OPENAI_SETTING = "set OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server)"


@dataclass(frozen=True, slots=True)
class OpenAIEndpoint:
    """Where ``openai/...`` embeddings are made: OpenAI itself or a compatible server."""

    base_url: str | None = None  # None: OpenAI's
    api_key: str | None = None
    timeout: float = 60.0

    @property
    def configured(self) -> bool:
        return bool(self.api_key or self.base_url)

    @property
    def url(self) -> str:
        return (self.base_url or OPENAI_URL).rstrip("/")

    @property
    def shown(self) -> str | None:
        """The endpoint a config shows: OpenAI's, never the address of a server set here."""
        return None if self.base_url else OPENAI_URL

    @classmethod
    def from_environment(cls) -> OpenAIEndpoint:
        """``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the environment has them."""
        return cls(os.environ.get("OPENAI_BASE_URL") or None,
                   os.environ.get("OPENAI_API_KEY") or None)


class UnconfiguredEmbedder:
    """The embedder of a stored config whose provider this process has no settings for:
    every call is an ``EmbeddingError`` that names the setting (the agent still loads)."""

    def __init__(self, model: str, dim: int, problem: str) -> None:
        self._model, self._dim, self.problem = model, dim, problem

    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int:
        return self._dim

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbeddingError(self.problem)


class Embedders:
    """The embedding models this process can use, each made once: the offline MiniLM always,
    ``openai/MODEL`` when ``openai`` is configured. ``config`` checks what a client asks for
    and answers Letta's ``EmbeddingConfig``; ``get`` gives the embedder of such a config.
    ``default`` ("minilm" or "openai/MODEL") serves whatever asks for no embedding."""

    def __init__(self, openai: OpenAIEndpoint | None = None, *, default: str = "minilm") -> None:
        self.openai = openai or OpenAIEndpoint()
        self.default_spec = default
        self._made: dict[tuple[Any, ...], Embedder] = {}

    @classmethod
    def from_environment(cls) -> Embedders:
        return cls(OpenAIEndpoint.from_environment())

    # -- configs ---------------------------------------------------------------------------

    def config(self, handle: str | None = None, config: Mapping[str, Any] | None = None,
               *, chunk_size: int | None = None) -> dict[str, Any]:
        """Letta's ``EmbeddingConfig`` for a handle (``"openai/text-embedding-3-small"``) or a
        config (its ``handle``, else ``embedding_endpoint_type`` and ``embedding_model``);
        neither: the default's. ``EmbeddingUnavailable`` names what is wrong or unset."""
        given = dict(config or {})
        handle = handle or given.get("handle")
        if handle:
            provider, _, model = str(handle).partition("/")
            if not model and provider in _MINILM_NAMES:  # stateloop's own name for it
                provider, model = "hugging-face", provider
            if not model:
                raise EmbeddingUnavailable(f"embedding {handle!r} must be 'PROVIDER/MODEL', "
                                           "e.g. 'openai/text-embedding-3-small'")
        elif given:
            provider = str(given.get("embedding_endpoint_type") or "")
            model = str(given.get("embedding_model") or "")
            if not provider or not model:
                raise EmbeddingUnavailable("embedding_config needs embedding_endpoint_type and "
                                           "embedding_model (or a handle)")
        else:
            found = self.default_config()
            if chunk_size is not None:
                found["embedding_chunk_size"] = chunk_size
            return found
        chunk = chunk_size or given.get("embedding_chunk_size") or DEFAULT_CHUNK_SIZE
        batch = given.get("batch_size") or DEFAULT_BATCH_SIZE
        dim = given.get("embedding_dim")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise EmbeddingUnavailable(f"embedding_dim must be a positive integer, not {dim!r}")
        for name, value in (("embedding_chunk_size", chunk), ("batch_size", batch)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise EmbeddingUnavailable(f"{name} must be a positive integer, not {value!r}")
        if provider in ("hugging-face", "letta") and model in _MINILM_NAMES:
            if dim not in (None, MiniLMEmbedder.DIM):
                raise EmbeddingUnavailable(f"{MiniLMEmbedder.MODEL} makes "
                                           f"{MiniLMEmbedder.DIM}-dim vectors, not {dim}")
            return {**self._minilm(), "embedding_chunk_size": chunk, "batch_size": batch}
        if provider == "openai":
            return self._openai(model, dim, given.get("embedding_endpoint"), chunk, batch)
        if _embeds(provider):
            return self._catalogued(CATALOGUE[provider], model, dim,
                                    given.get("embedding_endpoint"), chunk, batch)
        kind = registered.provider_type(provider)
        if kind is not None:  # a provider added at run time
            if not CATALOGUE[kind].embeddings:
                raise EmbeddingUnavailable(f"embedding '{provider}/{model}': provider "
                                           f"{provider!r} is of type {kind!r}, which has no "
                                           "embedding models here")
            _check_name(CATALOGUE[kind], model)
            return {"embedding_endpoint_type": endpoint_type(kind, embedding=True),
                    "embedding_endpoint": None, "embedding_model": model,
                    "embedding_dim": dim or 0, "embedding_chunk_size": chunk,
                    "handle": f"{provider}/{model}", "batch_size": batch}
        if provider == "letta":
            raise EmbeddingUnavailable(
                f"embedding {provider}/{model} is Letta's hosted service, not served here: ask "
                f"for openai/MODEL ({_OPENAI_SETTING}) or {MINILM_HANDLE} (offline), or leave "
                "the embedding out")
        if provider == "anthropic":
            raise EmbeddingUnavailable("anthropic has no embedding models: ask for "
                                       f"openai/MODEL or {MINILM_HANDLE}")
        raise EmbeddingUnavailable(
            f"embedding provider {provider!r} is not configured here: serve {model!r} through "
            f"an OpenAI-compatible endpoint and ask for openai/{model} ({_OPENAI_SETTING}), "
            f"or ask for {MINILM_HANDLE} (offline)")

    def default_config(self) -> dict[str, Any]:
        """The config of what serves agents, archives and folders that ask for nothing."""
        spec = self.default_spec
        if spec == "minilm":
            return self._minilm()
        model = spec.partition("/")[2]
        embedder = self.get_default()
        try:
            dim = embedder.dim
        except ConfigError:
            dim = OPENAI_DIMS.get(model, 0)  # measured on the first call
        return {"embedding_endpoint_type": "openai", "embedding_endpoint": self.openai.shown,
                "embedding_model": model, "embedding_dim": dim,
                "embedding_chunk_size": DEFAULT_CHUNK_SIZE, "handle": spec,
                "batch_size": DEFAULT_BATCH_SIZE}

    def available(self) -> list[dict[str, Any]]:
        """The configs of the models to be had by handle: the default first, the offline
        MiniLM, and OpenAI's own models when the OpenAI provider is configured."""
        found = [self.default_config(), self._minilm()]
        if self.openai.configured:
            found += [self._openai(model, None, None, DEFAULT_CHUNK_SIZE, DEFAULT_BATCH_SIZE)
                      for model in OPENAI_DIMS]
        unique: dict[str, dict[str, Any]] = {}
        for config in found:
            unique.setdefault(config["handle"], config)
        return list(unique.values())

    def _minilm(self) -> dict[str, Any]:
        return {"embedding_endpoint_type": "hugging-face", "embedding_endpoint": None,
                "embedding_model": MiniLMEmbedder.MODEL, "embedding_dim": MiniLMEmbedder.DIM,
                "embedding_chunk_size": DEFAULT_CHUNK_SIZE, "handle": MINILM_HANDLE,
                "batch_size": DEFAULT_BATCH_SIZE}

    def _openai(self, model: str, dim: int | None, endpoint: Any, chunk: int,
                batch: int) -> dict[str, Any]:
        if not self.openai.configured:
            raise EmbeddingUnavailable(f"embedding 'openai/{model}' needs the OpenAI provider: "
                                       f"{_OPENAI_SETTING}")
        if endpoint and str(endpoint).rstrip("/") not in (OPENAI_URL, self.openai.url):
            # Never the server's key to a URL a client names: embeddings go where it is set.
            raise EmbeddingUnavailable(
                f"embedding_endpoint {endpoint!r} is not this server's: openai/ embeddings go "
                "to the endpoint the operator set (OPENAI_BASE_URL); leave it out")
        native = OPENAI_DIMS.get(model)
        if native is not None and dim not in (None, native) and model not in _RESIZABLE:
            raise EmbeddingUnavailable(f"{model} makes {native}-dim vectors, not {dim}")
        return {"embedding_endpoint_type": "openai", "embedding_endpoint": self.openai.shown,
                "embedding_model": model, "embedding_dim": dim or native or 0,
                "embedding_chunk_size": chunk, "handle": f"openai/{model}",
                "batch_size": batch}

    def _catalogued(self, provider: Provider, model: str, dim: int | None, endpoint: Any,
                    chunk: int, batch: int) -> dict[str, Any]:
        problem = provider.missing()
        if problem is not None:
            raise EmbeddingUnavailable(f"embedding '{provider.name}/{model}' cannot be made "
                                       f"here: {problem}")
        _check_name(provider, model)
        where = provider.endpoint()
        if endpoint and str(endpoint).rstrip("/") != where.base_url:
            # Never a key to a URL a client names: embeddings go where the operator set.
            raise EmbeddingUnavailable(
                f"embedding_endpoint {endpoint!r} is not this server's: {provider.name}/ "
                f"embeddings go to the endpoint the operator set; leave it out")
        return {"embedding_endpoint_type": endpoint_type(provider.name, embedding=True),
                "embedding_endpoint": where.base_url if where.public else None,
                "embedding_model": model, "embedding_dim": dim or 0,
                "embedding_chunk_size": chunk, "handle": f"{provider.name}/{model}",
                "batch_size": batch}

    async def measured(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with its ``embedding_dim`` measured by one call when it is not known
        (an OpenAI-compatible server's own model): an ``EmbeddingError`` if the call fails."""
        if config.get("embedding_dim"):
            return config
        vectors = await self.get(config).embed(["dimension"])
        return {**config, "embedding_dim": int(vectors.shape[1])}

    # -- embedders -------------------------------------------------------------------------

    def get_default(self) -> Embedder:
        """The embedder of whatever asks for no embedding (``default``)."""
        spec = self.default_spec
        if spec == "minilm":
            return default_embedder()
        provider, _, model = spec.partition("/")
        if provider != "openai" or not model:
            raise ConfigError(f"STATELOOP_EMBEDDING must be 'minilm' or 'openai/MODEL', "
                              f"not {spec!r}")
        return self._openai_embedder(model, None, DEFAULT_BATCH_SIZE)

    def get(self, config: Mapping[str, Any] | None) -> Embedder:
        """The embedder of a stored config (None or empty: the default). One whose provider
        is not configured answers every call with an ``EmbeddingError`` naming the setting."""
        if not config or not config.get("embedding_model"):
            return self.get_default()
        model = str(config["embedding_model"])
        kind = config.get("embedding_endpoint_type")
        named = str(config.get("handle") or "").partition("/")[0]
        if _embeds(named):  # the handle names the provider; Letta's type may say "openai"
            kind = named
        if kind in ("hugging-face", "letta") and model in _MINILM_NAMES:
            return default_embedder()
        if kind == "openai" and self.openai.configured:
            dim = config.get("embedding_dim") or None
            resize = dim if model in _RESIZABLE and dim != OPENAI_DIMS[model] else None
            return self._openai_embedder(model, resize,
                                         int(config.get("batch_size") or DEFAULT_BATCH_SIZE))
        batch = int(config.get("batch_size") or DEFAULT_BATCH_SIZE)
        if _embeds(kind) and CATALOGUE[str(kind)].missing() is None:
            try:
                return self._provider_embedder(CATALOGUE[str(kind)], model, batch)
            except EmbeddingUnavailable as exc:  # a stored name no longer accepted
                return UnconfiguredEmbedder(model, int(config.get("embedding_dim") or 0),
                                            str(exc))
        if registered.provider_type(named) is not None:
            return RegisteredEmbedder(self, named, model, int(config.get("embedding_dim") or 0),
                                      batch)
        problem = (f"embedding '{config.get('handle') or f'{kind}/{model}'}' cannot be made "
                   f"here: " + (_OPENAI_SETTING if kind == "openai" else
                                "its provider is not served (ask for openai/MODEL or "
                                f"{MINILM_HANDLE})"))
        return UnconfiguredEmbedder(model, int(config.get("embedding_dim") or 0), problem)

    def for_agent(self, config: Mapping[str, Any] | None) -> Embedder:
        """What embeds an agent's new archive: the model it asked for, or the default when
        that one's provider is not configured here (an agent file from a server that had
        it): the archive records the model it is embedded with either way."""
        found = self.get(config)
        return self.get_default() if isinstance(found, UnconfiguredEmbedder) else found

    def for_model(self, model: str | None) -> Embedder:
        """The embedder of passages stored with ``model`` and no config (made by an older
        version): MiniLM's name is the offline model, any other an ``openai/`` one."""
        if model is None:
            return self.get_default()
        if model in _MINILM_NAMES:
            return default_embedder()
        return self.get({"embedding_endpoint_type": "openai", "embedding_model": model})

    def _provider_embedder(self, provider: Provider, model: str, batch: int,
                           env: Environment | None = None) -> OpenAIEmbedder:
        where = provider.endpoint(env)
        # Azure's embeddings are a deployment's, with the key in api-key.
        url = (azure_url(where.base_url, model, "embeddings", env) if provider.name == "azure"
               else None)
        key = (provider.name, model, where.base_url, url, where.api_key, batch)
        made = self._made.get(key)
        if made is None:  # "": no key sent (never OPENAI_API_KEY to another provider)
            if provider.wire == "gemini":
                made = GeminiEmbedder(model, base_url=where.base_url,
                                      api_key=where.api_key or "", batch_size=batch,
                                      timeout=self.openai.timeout)
            else:
                made = OpenAIEmbedder(model, base_url=where.base_url,
                                      api_key=where.api_key or "", batch_size=batch,
                                      timeout=self.openai.timeout, url=url,
                                      key_header="api-key" if url else "authorization")
            self._made[key] = made
        assert isinstance(made, OpenAIEmbedder)
        return made

    def _openai_embedder(self, model: str, dimensions: int | None, batch: int) -> Embedder:
        key = ("openai", model, dimensions, batch)
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = OpenAIEmbedder(
                model, base_url=self.openai.url, api_key=self.openai.api_key,
                dimensions=dimensions, batch_size=batch, timeout=self.openai.timeout)
        return made


class RegisteredEmbedder:
    """The embedder of a provider added at run time: each call finds the provider again (a
    changed key or address is used at once; a deleted provider is an ``EmbeddingError``)."""

    def __init__(self, embedders: Embedders, provider: str, model: str, dim: int,
                 batch: int) -> None:
        self._embedders, self.provider, self._model = embedders, provider, model
        self._dim, self._batch = dim, batch

    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int:
        if not self._dim:
            raise ConfigError(f"embedding dimension of {self.provider}/{self._model} is "
                              "unknown until the first call")
        return self._dim

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        found = await registered.find(self.provider)
        if found is None:
            raise EmbeddingError(f"embedding '{self.provider}/{self._model}' cannot be made: "
                                 f"its provider {self.provider!r} was deleted")
        kind = CATALOGUE[found.provider_type]
        try:
            embedder = self._embedders._provider_embedder(kind, self._model, self._batch,
                                                          found.environment())
        except EmbeddingUnavailable as exc:
            raise EmbeddingError(str(exc)) from None
        vectors = await embedder.embed(texts)
        if len(texts):
            self._dim = int(vectors.shape[1])
        return vectors


def _check_name(provider: Provider, model: str) -> None:
    """``EmbeddingUnavailable`` for a model name Gemini's URL path cannot hold."""
    if provider.wire == "gemini" and not GeminiEmbedder.MODEL_ID.fullmatch(
            model.removeprefix("models/")):
        raise EmbeddingUnavailable(f"embedding '{provider.name}/{model}': not a Gemini model "
                                   "name (letters, digits, '.', '_' and '-')")


def _embeds(provider: object) -> bool:
    """Whether ``provider`` is a catalogue provider other than OpenAI with embedding models."""
    found = CATALOGUE.get(str(provider))
    return found is not None and found.embeddings and found.name != "openai"


def serves(embedder: Embedder, model: str, dim: int | None) -> bool:
    """Whether ``embedder`` makes ``model``'s vectors of ``dim`` values (any, if not said)."""
    if embedder.model != model:
        return False
    try:
        return not dim or embedder.dim == dim
    except ConfigError:  # an endpoint's size shows on its first call
        return True


def describe(embedder: Embedder) -> dict[str, Any] | None:
    """Letta's ``EmbeddingConfig`` of an embedder made without one (None while its size is
    unknown: an endpoint's shows on the first call)."""
    remote = isinstance(embedder, OpenAIEmbedder)
    try:
        dim = embedder.dim
    except ConfigError:
        if not remote or embedder.model not in OPENAI_DIMS:
            return None
        dim = OPENAI_DIMS[embedder.model]
    shown = (OPENAI_URL if isinstance(embedder, OpenAIEmbedder)
             and embedder.base_url == OPENAI_URL else None)
    return {"embedding_endpoint_type": "openai" if remote else "hugging-face",
            "embedding_endpoint": shown, "embedding_model": embedder.model, "embedding_dim": dim,
            "embedding_chunk_size": DEFAULT_CHUNK_SIZE,
            "handle": f"{'openai' if remote else 'hugging-face'}/{embedder.model}",
            "batch_size": DEFAULT_BATCH_SIZE}
