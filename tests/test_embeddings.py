"""Embedders: the offline MiniLM default, an OpenAI-compatible endpoint and Gemini's
``batchEmbedContents``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from stateloop.memory.embedding_models import Embedders, OpenAIEndpoint, UnconfiguredEmbedder
from stateloop.memory.embeddings import (
    EmbeddingError,
    EmbeddingUnavailable,
    GeminiEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    minilm_tokenizer,
)
from stateloop.testing.fake_openai import FakeOpenAI

# Ids and vectors made with all-MiniLM-L6-v2's own tokenizer.json (make_reference.py).
REFERENCE = json.loads((Path(__file__).parent / "fixtures" / "minilm" / "reference.json")
                       .read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_minilm_vectors_are_unit_length_and_meaningful(minilm: MiniLMEmbedder) -> None:
    texts = ["The cat sat on the mat.", "A kitten is resting on a rug.",
             "Quarterly revenue grew by eight percent.", ""]
    vectors = minilm.embed_sync(texts)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-5)
    similar, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert similar > 0.5 > unrelated
    assert minilm.model == "all-MiniLM-L6-v2-int8" and minilm.dim == 384


async def test_minilm_batches_match_single_calls(minilm: MiniLMEmbedder) -> None:
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(40)] + ["word " * 400]
    batched = await minilm.embed(texts)
    one = minilm.embed_sync([texts[7]])[0]
    assert np.allclose(batched[7], one, atol=1e-4)  # padding must not change a vector
    assert batched.shape == (41, 384)
    assert minilm.embed_sync([]).shape == (0, 384)


def test_the_shipped_vocabulary_tokenizes_as_the_models_tokenizer_json() -> None:
    tokenizer = minilm_tokenizer(MiniLMEmbedder.MAX_TOKENS)
    tokenizer.no_padding()
    ids = [encoding.ids for encoding in tokenizer.encode_batch(REFERENCE["texts"])]
    for text, got, want in zip(REFERENCE["texts"], ids, REFERENCE["ids"], strict=True):
        assert got == want, text
    assert max(len(i) for i in ids) == 256  # long texts are cut at the model's limit
    assert any(100 in i for i in ids)  # and some corpus words are [UNK]


def test_minilm_vectors_match_the_models_own_tokenizer(minilm: MiniLMEmbedder) -> None:
    indices = [int(i) for i in REFERENCE["vectors"]]
    texts = [REFERENCE["texts"][i] for i in indices]
    want = np.array([REFERENCE["vectors"][str(i)] for i in indices], dtype=np.float32)
    assert np.allclose(minilm.embed_sync(texts), want, atol=1e-5)


def test_a_missing_model_file_is_an_embedding_error(tmp_path: Path) -> None:
    embedder = MiniLMEmbedder(model_file=tmp_path / "absent.onnx")
    with pytest.raises(EmbeddingError, match=r"model file .*absent\.onnx is missing"):
        embedder.embed_sync(["x"])


def _endpoint(requests: list[dict[str, object]], status: int = 200,
              dim: int = 3) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append({"url": str(request.url), "auth": request.headers.get("authorization"),
                         **body})
        if status != 200:
            return httpx.Response(status, json={"error": {"message": "bad key"}})
        data = [{"index": i, "embedding": [float(i + 1)] + [0.0] * (dim - 1)}
                for i in range(len(body["input"]))]
        return httpx.Response(200, json={"data": list(reversed(data)), "model": body["model"]})

    return httpx.MockTransport(handler)


async def test_openai_embedder_batches_orders_and_normalises() -> None:
    requests: list[dict[str, object]] = []
    async with httpx.AsyncClient(transport=_endpoint(requests)) as client:
        embedder = OpenAIEmbedder("text-embedding-3-small", base_url="http://emb.test/v1/",
                                  api_key="sk-test", batch_size=2, client=client)
        vectors = await embedder.embed(["a", "b", "c"])
    assert [r["input"] for r in requests] == [["a", "b"], ["c"]]
    assert requests[0]["url"] == "http://emb.test/v1/embeddings"
    assert requests[0]["auth"] == "Bearer sk-test"
    assert requests[0]["model"] == "text-embedding-3-small"
    assert np.allclose(vectors, [[1, 0, 0], [1, 0, 0], [1, 0, 0]])  # index order, unit length
    assert embedder.dim == 3


async def test_openai_embedder_errors_are_clear() -> None:
    async with httpx.AsyncClient(transport=_endpoint([], status=401)) as client:
        embedder = OpenAIEmbedder("m", base_url="http://emb.test/v1", client=client)
        with pytest.raises(EmbeddingError, match=r"401.*bad key"):
            await embedder.embed(["x"])
    async with httpx.AsyncClient(transport=_endpoint([], dim=5)) as client:
        embedder = OpenAIEmbedder("m", base_url="http://emb.test/v1", dimensions=3,
                                  client=client)
        with pytest.raises(EmbeddingError, match="5-dim vectors, expected 3"):
            await embedder.embed(["x"])


async def test_embedders_make_each_model_once_and_resize_where_openai_does() -> None:
    with FakeOpenAI() as fake:
        embedders = Embedders(OpenAIEndpoint(fake.base_url, "k"))
        config = embedders.config("openai/text-embedding-3-small",
                                  {"embedding_dim": 512, "batch_size": 2})
        assert (config["embedding_dim"], config["embedding_endpoint"]) == (512, None)
        embedder = embedders.get(config)
        assert embedders.get(dict(config)) is embedder
        vectors = await embedder.embed(["a", "b", "c"])
        assert vectors.shape == (3, 512)
        bodies = [r.body for r in fake.requests]
        assert [(b["input"], b["dimensions"]) for b in bodies] == [(["a", "b"], 512),
                                                                   (["c"], 512)]
        assert embedders.get(embedders.config("openai/text-embedding-3-small")) is not embedder
        assert embedders.get({}) is embedders.get_default()  # nothing asked: MiniLM


async def test_a_stored_config_whose_provider_is_gone_names_the_setting() -> None:
    embedders = Embedders(OpenAIEndpoint())  # no key, no base URL
    with pytest.raises(EmbeddingUnavailable, match=r"set OPENAI_API_KEY"):
        embedders.config("openai/text-embedding-3-small")
    stored = {"embedding_endpoint_type": "openai", "embedding_model": "text-embedding-3-small",
              "embedding_dim": 1536, "handle": "openai/text-embedding-3-small"}
    gone = embedders.get(stored)
    assert isinstance(gone, UnconfiguredEmbedder) and (gone.model, gone.dim) == (
        "text-embedding-3-small", 1536)
    with pytest.raises(EmbeddingError, match=r"openai/text-embedding-3-small.*OPENAI_API_KEY"):
        await gone.embed(["x"])
    # an agent asking for it makes its new archive with the default, which the archive records
    assert embedders.for_agent(stored) is embedders.get_default()
    assert [c["handle"] for c in embedders.available()] == ["hugging-face/all-MiniLM-L6-v2-int8"]


async def test_gemini_embeddings_are_batched_as_gemini_allows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI(api_key="g-key", embedding_dimensions=32) as fake:
        embedder = GeminiEmbedder("gemini-embedding-001", base_url=f"{fake.url}/v1beta",
                                  api_key="g-key", batch_size=500)
        texts = [f"text number {i}" for i in range(150)]
        vectors = await embedder.embed(texts)
        assert vectors.shape == (150, 32) and embedder.dim == 32
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        sizes = [len(r.body["requests"]) for r in fake.requests]
        assert sizes == [100, 50]  # Gemini takes 100 texts a request at most
        assert {r.headers["x-goog-api-key"] for r in fake.requests} == {"g-key"}
        wrong = GeminiEmbedder("gemini-embedding-001", base_url=fake.url, api_key="nope")
        with pytest.raises(EmbeddingError, match="answered 400"):
            await wrong.embed(["hi"])
    with pytest.raises(EmbeddingUnavailable, match="not a Gemini model name"):
        GeminiEmbedder("../../v1beta/files", base_url="https://example.com", api_key="k")
    # A stored config whose name is refused loads; its calls say why.
    monkeypatch.setenv("GEMINI_API_KEY", "g-key")
    stored = Embedders().get({"handle": "google_ai/../x", "embedding_model": "../x",
                              "embedding_endpoint_type": "google_ai", "embedding_dim": 8})
    assert isinstance(stored, UnconfiguredEmbedder)
    with pytest.raises(EmbeddingError, match="not a Gemini model name"):
        await stored.embed(["hi"])

