"""Model listings in each provider's own wire format, read from the fake over loopback:
OpenAI's ``/v1/models`` (filtered to chat models at OpenAI's own address), Anthropic's paged
``/v1/models``, an Azure resource's deployments read and checked with Azure's ``api-key``
header (the fake refuses a Bearer key, as Azure does), and Azure chat through a deployment."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from stateloop.llm import listing
from stateloop.llm.base import ModelRequest, ModelResponse
from stateloop.llm.providers import CATALOGUE, Endpoint, chat_model
from stateloop.messages import user
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI([reply("deployed")], api_key="the-key") as server:
        yield server


def test_openai_and_anthropic_are_listed_from_their_own_listing(
        fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "ANTHROPIC_PAGE", 2)  # three models: two pages
    env = dict(OPENAI_API_KEY="the-key", OPENAI_BASE_URL=fake.base_url,
               ANTHROPIC_API_KEY="the-key", ANTHROPIC_BASE_URL=fake.url)
    models, failures = asyncio.run(listing.list_all(env, timeout=20))
    assert failures == {}
    found = {m.handle: m for m in models}
    assert found["openai/fake-model"].endpoint is None  # an operator's address: not shown
    claude = found["anthropic/claude-sonnet-4-5-20250929"]
    assert (claude.context_window, claude.max_tokens, claude.embedding) == (200_000, 64_000,
                                                                            False)
    assert {h for h in found if h.startswith("anthropic/")} == {
        "anthropic/claude-sonnet-4-5-20250929", "anthropic/claude-haiku-4-5-20251001",
        "anthropic/claude-opus-4-1-20250805"}
    pages = [r for r in fake.listings if r.headers.get("anthropic-version")]
    assert [r.path for r in pages] == [
        "/v1/models?limit=2", "/v1/models?limit=2&after_id=claude-haiku-4-5-20251001"]
    assert {r.headers["x-api-key"] for r in pages} == {"the-key"}

    wrong = {**env, "ANTHROPIC_API_KEY": "wrong", "OPENAI_API_KEY": "wrong"}
    models, failures = asyncio.run(listing.list_all(wrong, timeout=20))
    assert failures == {"openai": "HTTP 401", "anthropic": "HTTP 401"} and models == []
    with pytest.raises(listing.ListingError, match="HTTP 401"):
        asyncio.run(listing.check_key(CATALOGUE["anthropic"], wrong, timeout=20))


def test_openais_own_listing_keeps_the_models_agents_can_chat_with() -> None:
    body = {"object": "list", "data": [{"id": name, "object": "model"} for name in (
        "gpt-4o-mini", "gpt-5", "o3-mini", "gpt-4o-realtime-preview", "o1-mini", "whisper-1",
        "dall-e-3", "tts-1", "text-embedding-3-small", "gpt-4o-transcribe")]}
    own = Endpoint("https://api.openai.com/v1", "sk", {}, public=True)
    kept = listing._openai_models(CATALOGUE["openai"], own, body)
    assert [m.model for m in kept] == ["gpt-4o-mini", "gpt-5", "o3-mini",
                                       "text-embedding-3-small"]
    assert kept[0].endpoint == "https://api.openai.com/v1"
    # A compatible server the operator names lists what it serves, unfiltered.
    proxy = Endpoint("http://127.0.0.1:8000/v1", None, {}, public=False)
    assert len(listing._openai_models(CATALOGUE["openai"], proxy, body)) == 10


def test_azure_lists_its_deployments_and_is_called_with_its_api_key_header(
        fake: FakeOpenAI) -> None:
    env = dict(AZURE_API_KEY="the-key", AZURE_BASE_URL=fake.url)
    found = {m.handle: m for m in asyncio.run(
        listing.list_provider(CATALOGUE["azure"], env, timeout=20))}
    deployment = found["azure/fake-deployment"]
    assert (deployment.context_window, deployment.embedding) == (128_000, False)  # gpt-4o's
    assert found["azure/fake-embedding"].embedding
    [asked] = fake.listings
    assert asked.path == "/openai/deployments?api-version=2023-03-15-preview"
    assert asked.headers["api-key"] == "the-key" and "authorization" not in asked.headers
    asyncio.run(listing.check_key(CATALOGUE["azure"], env, timeout=20))
    with pytest.raises(listing.ListingError, match="HTTP 401"):
        asyncio.run(listing.check_key(CATALOGUE["azure"], {**env, "AZURE_API_KEY": "wrong"},
                                      timeout=20))
    # A v1 endpoint's deployments are read from its resource.
    v1 = {**env, "AZURE_BASE_URL": f"{fake.url}/openai/v1"}
    assert {m.model for m in asyncio.run(listing.list_provider(
        CATALOGUE["azure"], v1, timeout=20))} == {"fake-deployment", "fake-embedding"}

    model = chat_model("azure", "fake-deployment", env={**env, "AZURE_API_VERSION": "2025-01-01"})

    async def call() -> list[ModelResponse]:
        return [item async for item in model.stream(ModelRequest(messages=[user("hi")]))
                if isinstance(item, ModelResponse)]

    [response] = asyncio.run(call())
    assert response.message.text == "deployed"
    [sent] = fake.requests
    assert sent.path == "/openai/deployments/fake-deployment/chat/completions"
    assert sent.headers["api-key"] == "the-key"
    # A deployment name stays one path segment.
    odd = chat_model("azure", "../../x?y", env=env)
    assert odd._chat_url.startswith(  # type: ignore[attr-defined]
        f"{fake.url}/openai/deployments/..%2F..%2Fx%3Fy/chat/completions?api-version=")
