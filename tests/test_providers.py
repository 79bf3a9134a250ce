"""The provider catalogue: every provider Letta 0.16.8 names resolves by handle or says why
not, the variables that configure each, provider listings read within bounds from real
loopback servers (a good one, one that hangs, one that answers garbage or too much), and
``stateloop models``."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from typer.testing import CliRunner

from stateloop.cli.app import app
from stateloop.errors import AuthenticationError, ConfigError
from stateloop.llm import listing
from stateloop.llm.anthropic import AnthropicModel
from stateloop.llm.base import ModelRequest, ModelResponse, ToolSpec
from stateloop.llm.openai import OpenAIModel
from stateloop.llm.providers import CATALOGUE, UnconfiguredModel
from stateloop.llm.registry import resolve_model
from stateloop.messages import user
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply

# Letta 0.16.8's ProviderType (letta/schemas/enums.py), every member.
LETTA_PROVIDERS = {
    "anthropic", "azure", "baseten", "bedrock", "cerebras", "chatgpt_oauth", "deepseek",
    "fireworks", "google_ai", "google_vertex", "groq", "hugging-face", "letta",
    "lmstudio_openai", "minimax", "mistral", "ollama", "openai", "together", "vllm", "sglang",
    "openrouter", "xai", "zai", "zai_coding"}
EVERY_VARIABLE = sorted({v for p in CATALOGUE.values() for v in p.variables})


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No provider configured, whatever the machine's environment holds."""
    for variable in EVERY_VARIABLE:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def test_the_catalogue_names_every_letta_provider() -> None:
    assert set(CATALOGUE) == LETTA_PROVIDERS
    for provider in CATALOGUE.values():
        if provider.wire == "none":  # not served: the reason is given
            assert provider.not_served and len(provider.not_served) > 20, provider.name


def test_a_provider_without_its_variables_names_them_when_called(
        clean_env: pytest.MonkeyPatch) -> None:
    model = resolve_model("groq/llama-3.3-70b-versatile")
    assert isinstance(model, UnconfiguredModel)
    assert (model.name, model.context_window) == ("groq/llama-3.3-70b-versatile", 131_072)

    async def call() -> None:
        async for _ in model.stream(ModelRequest(messages=[user("hi")])):
            pass

    with pytest.raises(AuthenticationError, match="GROQ_API_KEY"):
        asyncio.run(call())
    assert "OLLAMA_BASE_URL" in resolve_model("ollama/llama3.1:8b").problem  # type: ignore[attr-defined]
    azure = resolve_model("azure/my-deployment").problem  # type: ignore[attr-defined]
    assert "AZURE_API_KEY and AZURE_BASE_URL" in azure
    # the limits table knows the providers' common models
    assert resolve_model("xai/grok-4-0709").context_window == 256_000
    assert resolve_model("deepseek/deepseek-reasoner").max_output_tokens == 64_000
    assert resolve_model("minimax/MiniMax-M2").context_window == 200_000


def test_not_served_and_unknown_providers_say_why(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="SigV4"):
        resolve_model("bedrock/anthropic.claude-3-5-sonnet")
    with pytest.raises(ConfigError, match="Letta's hosted service"):
        resolve_model("letta/letta-free")
    with pytest.raises(ConfigError, match="groq, lmstudio_openai, minimax") as caught:
        resolve_model("nope/model")
    assert "bedrock" not in str(caught.value)


def test_chat_completions_providers_get_their_endpoint_key_and_quirks(
        clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_API_KEY", "sk-openai")
    clean_env.setenv("GROQ_API_KEY", "gsk-groq")
    groq = resolve_model("groq/llama-3.3-70b-versatile", api_key="sk-other",
                         base_url="http://127.0.0.1:1/v1")
    assert isinstance(groq, OpenAIModel)
    assert groq.name == "groq/llama-3.3-70b-versatile"
    assert groq.base_url == "https://api.groq.com/openai/v1"  # not the openai/ options
    assert groq._headers()["authorization"] == "Bearer gsk-groq"

    clean_env.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:11434")
    ollama = resolve_model("ollama/qwen3:8b")
    assert isinstance(ollama, OpenAIModel)
    assert ollama.base_url == "http://127.0.0.1:11434/v1"  # /v1 added, as Letta does
    assert ollama._headers()["authorization"] == "Bearer none"  # never OPENAI_API_KEY

    clean_env.setenv("AZURE_API_KEY", "az-key")
    clean_env.setenv("AZURE_BASE_URL", "https://example.openai.azure.com")
    clean_env.setenv("AZURE_API_VERSION", "2025-01-01")
    azure = resolve_model("azure/gpt4o-prod")
    assert isinstance(azure, OpenAIModel)
    assert azure._chat_url == ("https://example.openai.azure.com/openai/deployments/gpt4o-prod/"
                               "chat/completions?api-version=2025-01-01")
    headers = azure._headers()
    assert headers["api-key"] == "az-key" and "authorization" not in headers

    clean_env.setenv("ZAI_API_KEY", "z")
    zai = resolve_model("zai/glm-4.6")
    body = json.loads(zai.body(ModelRequest(messages=[user("hi")],  # type: ignore[attr-defined]
                                            max_tokens=100)))
    assert body["max_tokens"] == 100 and "max_completion_tokens" not in body

    clean_env.setenv("MINIMAX_API_KEY", "m")
    minimax = resolve_model("minimax/MiniMax-M2")
    assert isinstance(minimax, AnthropicModel) and minimax.name == "minimax/MiniMax-M2"

    openai = resolve_model("openai/gpt-4o-mini", base_url="http://127.0.0.1:1/v1")
    assert isinstance(openai, OpenAIModel) and openai.base_url == "http://127.0.0.1:1/v1"


def test_a_server_refusing_optional_fields_is_answered_without_them(
        clean_env: pytest.MonkeyPatch) -> None:
    refused = ["stream_options", "parallel_tool_calls"]
    with FakeOpenAI([reply("fine"), reply("fine")], reject_fields=refused) as fake:
        clean_env.setenv("GROQ_API_KEY", "k")
        clean_env.setenv("GROQ_BASE_URL", fake.base_url)
        model = resolve_model("groq/llama-3.3-70b-versatile")
        tool = ToolSpec("noop", "Does nothing.", {"type": "object", "properties": {}})

        async def call() -> list[ModelResponse]:
            request = ModelRequest(messages=[user("hi")], tools=[tool],
                                   parallel_tool_calls=False)
            return [item async for item in model.stream(request)
                    if isinstance(item, ModelResponse)]

        for _ in range(2):  # the second call sends neither field at once
            [response] = asyncio.run(call())
            assert response.message.text == "fine"
        sent = [sorted(set(refused) & set(r.body)) for r in fake.requests]
        # the fake names one refused field at a time, in no fixed order
        assert sent[0] == sorted(refused) and len(sent[1]) == 1, sent
        assert sent[2:] == [[], []], sent


def test_google_ai_resolves_to_the_gemini_adapter(clean_env: pytest.MonkeyPatch) -> None:
    google = pytest.importorskip("stateloop.llm.google")  # the Gemini adapter, when installed
    clean_env.setenv("GEMINI_API_KEY", "g")
    model = resolve_model("google_ai/gemini-2.0-flash")
    assert isinstance(model, google.GeminiModel)


# -- listings from loopback servers ---------------------------------------------------------

LISTING = {"data": [
    {"id": "llama-3.3-70b-versatile", "object": "model", "context_window": 131072},
    {"id": "mystery-model", "object": "model"},
    {"id": "nomic-embed-text", "object": "model"},
    {"id": "bad-window", "object": "model", "context_window": "lots"},
    "not a model"]}
GEMINI = {"models": [
    {"name": "models/gemini-2.0-flash", "inputTokenLimit": 1048576, "outputTokenLimit": 8192,
     "supportedGenerationMethods": ["generateContent", "countTokens"]},
    {"name": "models/text-embedding-004", "inputTokenLimit": 2048,
     "supportedGenerationMethods": ["embedContent"]},
    {"name": "models/aqa", "supportedGenerationMethods": ["generateAnswer"]}]}
TOGETHER = [{"id": "meta-llama/Llama-3.3-70B-Instruct-Turbo", "type": "chat",
             "context_length": 131072},
            {"id": "BAAI/bge-base-en-v1.5", "type": "embedding", "context_length": 512}]


class _Listings(BaseHTTPRequestHandler):
    release = threading.Event()
    keys: list[str | None] = []  # Gemini's key header, as received

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        kind = self.path.strip("/").split("/")[0]
        if kind == "hang":
            self.release.wait(15)  # bounded: the test sets it when done
            body = b"{}"
        elif kind == "garbage":
            body = b"<html>not json</html>"
        elif kind == "huge":
            body = json.dumps({"data": [{"id": f"m{i}"} for i in range(5000)]}).encode()
        elif kind == "together":
            body = json.dumps(TOGETHER).encode()
        elif kind == "anthropic-loop":  # "more" for ever, the same page each time
            self.keys.append(self.path)
            body = json.dumps({"data": [{"type": "model", "id": "claude-sonnet-4-5"}],
                               "has_more": True, "last_id": "claude-sonnet-4-5"}).encode()
        elif kind == "gemini" and self.path.startswith("/gemini/v1beta/models"):
            self.keys.append(self.headers.get("x-goog-api-key"))
            body = json.dumps(GEMINI).encode()
        else:
            body = json.dumps(LISTING).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def listings() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Listings)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Listings.release.set()
    server.shutdown()
    server.server_close()


def test_listings_are_read_in_letta_terms_and_bounded(listings: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"GROQ_API_KEY": "k", "GROQ_BASE_URL": f"{listings}/good/v1",
           "TOGETHER_API_KEY": "k", "TOGETHER_BASE_URL": f"{listings}/together/v1",
           "VLLM_API_BASE": f"{listings}/hang", "OLLAMA_BASE_URL": f"{listings}/garbage",
           "LMSTUDIO_BASE_URL": f"{listings}/huge",
           "GEMINI_API_KEY": "gemini-key", "GEMINI_BASE_URL": f"{listings}/gemini/"}
    monkeypatch.setattr(listing, "MAX_BYTES", 50_000)
    started = time.monotonic()
    # A listing that never comes ends at the timeout; the others, on loopback, well before
    # it even on a loaded machine.
    models, failures = asyncio.run(listing.list_all(env, timeout=4.0))
    assert time.monotonic() - started < 12
    found = {m.handle: m for m in models}
    assert found["groq/llama-3.3-70b-versatile"].context_window == 131072
    assert found["groq/mystery-model"].context_window == 8192  # the table's default
    assert found["groq/bad-window"].context_window == 8192
    assert found["groq/nomic-embed-text"].embedding
    assert found["groq/llama-3.3-70b-versatile"].endpoint is None  # an operator's URL: hidden
    assert found["together/meta-llama/Llama-3.3-70B-Instruct-Turbo"].context_window == 131072
    assert found["together/BAAI/bge-base-en-v1.5"].embedding
    gemini = found["google_ai/gemini-2.0-flash"]
    assert (gemini.context_window, gemini.max_tokens, gemini.embedding) == (1048576, 8192, False)
    assert found["google_ai/text-embedding-004"].embedding
    assert "google_ai/aqa" not in found  # neither generates content nor embeds
    assert _Listings.keys == ["gemini-key"]
    assert set(failures) == {"vllm", "ollama", "lmstudio_openai"}
    assert "within 4 s" in failures["vllm"]
    assert "not JSON" in failures["ollama"]
    assert "larger than 50000 bytes" in failures["lmstudio_openai"]
    assert not any(m.provider in failures for m in models)


def test_a_paged_listing_that_never_ends_is_read_once(listings: str) -> None:
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": f"{listings}/anthropic-loop"}
    _Listings.keys.clear()
    models = asyncio.run(listing.list_provider(CATALOGUE["anthropic"], env, timeout=10))
    assert [m.handle for m in models] == ["anthropic/claude-sonnet-4-5"]
    assert _Listings.keys == ["/anthropic-loop/v1/models?limit=1000",
                              "/anthropic-loop/v1/models?limit=1000&after_id=claude-sonnet-4-5"]


def test_model_listings_answer_within_their_wait_and_fill_in_later(
        listings: str, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GROQ_API_KEY", "k")
    clean_env.setenv("GROQ_BASE_URL", f"{listings}/good/v1")
    clean_env.setenv("VLLM_API_BASE", f"{listings}/hang")

    async def scenario() -> tuple[float, float, list[str], list[str]]:
        kept = listing.ModelListings(wait=0.5, timeout=3.0)
        started = time.monotonic()
        first = [m.handle for m in await kept.current()]
        took = time.monotonic() - started
        started = time.monotonic()
        later = [m.handle for m in await kept.current()]
        again = time.monotonic() - started
        await kept.close()
        return took, again, first, later

    took, again, first, later = asyncio.run(scenario())
    assert took < 2.0  # not the hanging provider's 3 s
    assert again < 0.3  # the refresh still runs; a later request does not wait for it
    assert "groq/llama-3.3-70b-versatile" in first and "groq/llama-3.3-70b-versatile" in later


def test_stateloop_models_lists_the_usable_and_names_what_is_missing(
        listings: str) -> None:
    env: dict[str, str | None] = {variable: None for variable in EVERY_VARIABLE}
    env.update(GROQ_API_KEY="k", GROQ_BASE_URL=f"{listings}/good/v1",
               OLLAMA_BASE_URL=f"{listings}/garbage", OPENAI_API_KEY="sk",
               OPENAI_BASE_URL=f"{listings}/good/v1", MINIMAX_API_KEY="m")
    done = CliRunner().invoke(app, ["models", "--timeout", "2"], env=env,
                              catch_exceptions=False)
    assert done.exit_code == 0, done.output
    usable, _, unusable = done.stdout.partition("Not usable:")
    assert "groq: 4 models" in usable
    assert "groq/llama-3.3-70b-versatile  (131072 tokens)" in usable
    assert "openai: 4 models" in usable and "openai/mystery-model" in usable
    assert "minimax: configured; name a model as minimax/MODEL" in usable  # no listing
    assert "ollama: configured; its model listing failed (the listing is not JSON" in usable
    assert "together: set TOGETHER_API_KEY to use together/ models" in unusable
    assert "azure: set AZURE_API_KEY and AZURE_BASE_URL" in unusable
    assert "bedrock: bedrock is not served: AWS Bedrock" in unusable
