"""Agents on providers other than OpenAI and Anthropic, through letta-client: the fake
provider stands in for groq, together and ollama through their variables; a tool call and
a reply end to end, ``override_model``, a missing key named, ``/v1/models`` listing what they
offer (and a provider that cannot be listed breaking nothing), their embeddings."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from letta_spec import assert_letta_shape
from patience import ANSWERS
from stateloop.llm.providers import CATALOGUE
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from test_server_support import Server, settings_for

GROQ = "groq/llama-3.3-70b-versatile"
TOGETHER = "together/meta-llama/Llama-3.3-70B-Instruct-Turbo"
SHOUT = '''
def shout(text: str) -> str:
    """Repeat the text in capitals.

    Args:
        text: What to repeat.
    """
    return text.upper()
'''


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def fake(script: Script) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(script, chunk_size=4, embedding_dimensions=24) as server:
        yield server


@pytest.fixture(scope="module")
def mistral(script: Script) -> Iterator[FakeOpenAI]:
    """Mistral: tool-call ids of nine letters and digits, any other refused."""
    with FakeOpenAI(script, chunk_size=4, embedding_dimensions=16, mistral_ids=True) as server:
        yield server


@pytest.fixture(scope="module")
def silent() -> Iterator[str]:
    """An address that takes connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


class _Listing(BaseHTTPRequestHandler):
    """A provider's ``GET /v1/models`` with one chat and one embedding model."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps({"data": [{"id": "nomic-ai/nomic-embed-text-v1.5"},
                                    {"id": "llama-v3p1-8b-instruct",
                                     "context_length": 131072}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def listing() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Listing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, mistral: FakeOpenAI, silent: str, listing: str,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with pytest.MonkeyPatch.context() as env:
        for variable in {v for p in CATALOGUE.values() for v in p.variables}:
            env.delenv(variable, raising=False)
        env.setenv("GROQ_API_KEY", "gsk-test")
        env.setenv("GROQ_BASE_URL", fake.base_url)
        env.setenv("TOGETHER_API_KEY", "together-test")
        env.setenv("TOGETHER_BASE_URL", fake.base_url)
        env.setenv("OLLAMA_BASE_URL", fake.url)  # without /v1, as Ollama's users write it
        env.setenv("MINIMAX_API_KEY", "minimax-test")
        env.setenv("MISTRAL_API_KEY", "mistral-test")
        env.setenv("MISTRAL_BASE_URL", mistral.base_url)
        env.setenv("ANTHROPIC_API_KEY", "anthropic-test")
        env.setenv("ANTHROPIC_BASE_URL", fake.url)  # its paged /v1/models
        env.setenv("GEMINI_API_KEY", "gemini-test")
        env.setenv("GEMINI_BASE_URL", fake.url)  # Google's generateContent
        env.setenv("MINIMAX_BASE_URL", fake.url)  # Anthropic Messages
        env.setenv("VLLM_API_BASE", f"http://127.0.0.1:{_closed_port()}")  # nothing there
        env.setenv("SGLANG_API_BASE", silent)  # its listing never comes
        env.setenv("FIREWORKS_API_BASE", listing)  # a provider with embeddings
        env.setenv("XAI_BASE_URL", listing)  # one without
        db = tmp_path_factory.mktemp("providers") / "stateloop.db"
        with Server(settings_for(fake, db)) as running:
            yield running


@pytest.fixture
def client(server: Server, script: Script) -> Letta:
    script.set()
    return Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)


def _chat_requests(fake: FakeOpenAI, since: int) -> list[Any]:
    return [r for r in fake.requests[since:] if r.path.endswith("/chat/completions")]


def test_a_groq_agent_calls_a_tool_and_replies(client: Letta, script: Script,
                                               fake: FakeOpenAI) -> None:
    client.tools.create(source_code=SHOUT)
    agent = client.agents.create(model=GROQ, tools=["shout"], include_base_tools=False)
    assert agent.model == GROQ
    assert agent.llm_config.context_window == 131_072
    script.set(call("shout", text="hello"), reply("It said HELLO."))
    seen = len(fake.requests)
    response = client.agents.messages.create(agent.id, input="shout hello")
    assert [m.message_type for m in response.messages] == [
        "tool_call_message", "tool_return_message", "assistant_message"]
    assert response.messages[1].tool_return == "HELLO"  # type: ignore[union-attr]
    assert response.messages[2].content == "It said HELLO."  # type: ignore[union-attr]
    requests = _chat_requests(fake, seen)
    assert [r.body["model"] for r in requests] == ["llama-3.3-70b-versatile"] * 2
    assert {r.headers["authorization"] for r in requests} == {"Bearer gsk-test"}
    # an llm_config without a handle names the provider by its endpoint type, as Letta's do
    by_config = client.agents.create(include_base_tools=False, llm_config={
        "model": "llama-3.3-70b-versatile", "model_endpoint_type": "groq",
        "context_window": 32000})
    assert by_config.model == GROQ


def test_a_gemini_agent_calls_a_tool_and_replies(client: Letta, script: Script,
                                                 fake: FakeOpenAI) -> None:
    client.tools.create(source_code=SHOUT)
    agent = client.agents.create(model="google_ai/gemini-2.5-flash", tools=["shout"],
                                 include_base_tools=False)
    assert agent.model == "google_ai/gemini-2.5-flash"
    assert agent.llm_config.context_window == 1_048_576
    script.set(call("shout", text="hello"), reply("It said HELLO."))
    seen = len(fake.requests)
    response = client.agents.messages.create(agent.id, input="shout hello")
    assert [m.message_type for m in response.messages] == [
        "tool_call_message", "tool_return_message", "assistant_message"]
    assert response.messages[1].tool_return == "HELLO"  # type: ignore[union-attr]
    assert response.messages[2].content == "It said HELLO."  # type: ignore[union-attr]
    requests = [r for r in fake.requests[seen:] if "GenerateContent" in r.path]
    assert [r.path.split("?")[0] for r in requests] == [
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent"] * 2
    assert {r.headers["x-goog-api-key"] for r in requests} == {"gemini-test"}
    assert "authorization" not in requests[0].headers  # the openai/ key goes nowhere else
    # the tool's result went back as Gemini's functionResponse, naming its function
    [response_part] = [part for content in requests[1].body["contents"]
                       for part in content["parts"] if "functionResponse" in part]
    assert response_part["functionResponse"]["name"] == "shout"


def test_ollama_and_together_agents_reply_with_their_own_endpoints(
        client: Letta, script: Script, fake: FakeOpenAI) -> None:
    for handle, key in (("ollama/qwen3:8b", "Bearer none"), (TOGETHER, "Bearer together-test")):
        agent = client.agents.create(model=handle, include_base_tools=False)
        script.set(reply(f"hello from {handle}"))
        seen = len(fake.requests)
        frames = list(client.agents.messages.create(agent.id, input="hi", streaming=True))
        assert [f.content for f in frames  # type: ignore[union-attr]
                if f.message_type == "assistant_message"] == [f"hello from {handle}"]
        [request] = _chat_requests(fake, seen)
        assert request.body["model"] == handle.partition("/")[2]
        assert request.headers["authorization"] == key  # never the openai/ key ("test")


def test_an_anthropic_format_provider_replies(client: Letta, script: Script,
                                             fake: FakeOpenAI) -> None:
    agent = client.agents.create(model="minimax/MiniMax-M2", include_base_tools=False)
    assert agent.llm_config.context_window == 200_000
    script.set(reply("hello from MiniMax"))
    seen = len(fake.requests)
    response = client.agents.messages.create(agent.id, input="hi")
    assert response.messages[-1].content == "hello from MiniMax"  # type: ignore[union-attr]
    [request] = [r for r in fake.requests[seen:] if r.path == "/v1/messages"]
    assert request.body["model"] == "MiniMax-M2"
    assert request.headers["x-api-key"] == "minimax-test"


def test_override_model_takes_a_provider_handle(client: Letta, script: Script,
                                                fake: FakeOpenAI) -> None:
    agent = client.agents.create(model="openai/gpt-4o-mini", include_base_tools=False)
    script.set(reply("from groq"))
    seen = len(fake.requests)
    response = client.agents.messages.create(agent.id, input="hi", override_model=GROQ)
    assert response.messages[-1].content == "from groq"  # type: ignore[union-attr]
    [request] = _chat_requests(fake, seen)
    assert request.body["model"] == "llama-3.3-70b-versatile"
    assert request.headers["authorization"] == "Bearer gsk-test"
    assert client.agents.retrieve(agent.id).model == "openai/gpt-4o-mini"
    with pytest.raises(letta_client.BadRequestError, match="together"):
        client.agents.messages.create(agent.id, input="x", override_model="nope/model")


def test_a_provider_without_its_key_is_named_when_its_model_is_called(
        client: Letta, fake: FakeOpenAI) -> None:
    agent = client.agents.create(model="deepseek/deepseek-chat", include_base_tools=False)
    seen = len(fake.requests)
    with pytest.raises(letta_client.APIStatusError) as caught:
        client.agents.messages.create(agent.id, input="hi")
    assert caught.value.status_code == 401
    assert "DEEPSEEK_API_KEY" in str(caught.value.body)
    assert _chat_requests(fake, seen) == []  # nothing was sent anywhere
    with pytest.raises(letta_client.APIStatusError, match="SigV4"):
        client.agents.create(model="bedrock/anthropic.claude-3-5-sonnet",
                             include_base_tools=False)


def test_models_list_what_the_configured_providers_offer(server: Server,
                                                         client: Letta) -> None:
    started = time.monotonic()
    models = {m.handle: m for m in client.models.list()}
    assert time.monotonic() - started < 6  # the silent provider holds it back 2 s at most
    started = time.monotonic()
    assert client.models.list()  # later requests do not wait for it at all
    assert time.monotonic() - started < 1.5
    # A listing slower than the first request's wait (a loaded machine) shows on a later one.
    wanted = {f"{p}/fake-model" for p in ("groq", "together", "ollama", "openai")}
    wanted.add("anthropic/claude-haiku-4-5-20251001")
    deadline = time.monotonic() + ANSWERS
    while not wanted <= set(models) and time.monotonic() < deadline:
        time.sleep(0.2)
        models = {m.handle: m for m in client.models.list()}
    # The fake lists one model; each provider pointed at it lists it under its own name.
    for provider, kind in (("groq", "groq"), ("together", "together"), ("ollama", "openai")):
        model = models[f"{provider}/fake-model"]
        assert (model.provider_type, model.provider_name, model.model_endpoint_type) == (
            provider, provider, kind)  # Letta writes Ollama's models as "openai"
        assert model.model_endpoint is None  # an address the operator set is not shown
        assert model.context_window == 8192
    assert not any(handle.startswith(("vllm/", "sglang/")) for handle in models)
    assert "openai/gpt-4o-mini" in models  # the default, as before, and first: a client
    assert client.models.list()[0].handle == "openai/gpt-4o-mini"  # taking the first gets it
    # OpenAI's and Anthropic's models come from their own listings, as the others' do.
    assert models["openai/fake-model"].model_endpoint_type == "openai"
    claude = models["anthropic/claude-haiku-4-5-20251001"]
    assert (claude.provider_type, claude.context_window) == ("anthropic", 200_000)
    assert {m.provider_name for m in client.models.list(provider_name="groq")} == {"groq"}
    body = httpx.get(f"{server.url}/v1/models/").json()
    assert_letta_shape("/v1/models/", "get", body)
    assert models["fireworks/llama-v3p1-8b-instruct"].context_window == 131072
    embeddings = {m.handle: m for m in client.models.embeddings.list()}
    assert embeddings["fireworks/nomic-ai/nomic-embed-text-v1.5"].provider_type == "fireworks"
    assert "xai/nomic-ai/nomic-embed-text-v1.5" not in embeddings  # xai/ embeds nothing here
    assert_letta_shape("/v1/models/embedding", "get",
                       httpx.get(f"{server.url}/v1/models/embedding").json())
    providers = {p["name"]: p["provider_type"]
                 for p in httpx.get(f"{server.url}/v1/providers").json()}
    assert {"groq", "together", "ollama", "openai"} <= set(providers)
    assert providers["groq"] == "groq"


def test_provider_embeddings_go_to_the_configured_endpoint(server: Server, client: Letta,
                                                           fake: FakeOpenAI) -> None:
    agent = client.agents.create(model=GROQ, embedding="ollama/nomic-embed-text",
                                 include_base_tools=False)
    assert agent.embedding_config is not None
    assert (agent.embedding_config.embedding_endpoint_type,
            agent.embedding_config.embedding_dim) == ("ollama", 24)
    seen = len(fake.requests)
    client.agents.passages.create(agent.id, text="The sky is blue.")
    [request] = [r for r in fake.requests[seen:] if r.path.endswith("/embeddings")]
    assert request.body["model"] == "nomic-embed-text"
    assert "authorization" not in request.headers  # no key: none is sent, not openai/'s
    with pytest.raises(letta_client.UnprocessableEntityError, match="not this server's"):
        client.agents.create(model=GROQ, include_base_tools=False, embedding_config={
            "embedding_endpoint_type": "ollama", "embedding_model": "nomic-embed-text",
            "embedding_endpoint": "http://attacker.example/v1", "embedding_dim": 24})
    with pytest.raises(letta_client.UnprocessableEntityError, match="set LMSTUDIO_BASE_URL"):
        client.agents.create(model=GROQ, embedding="lmstudio_openai/nomic-embed-text",
                             include_base_tools=False)


def test_gemini_and_mistral_embeddings_go_to_their_own_apis(server: Server, client: Letta,
                                                            fake: FakeOpenAI,
                                                            mistral: FakeOpenAI) -> None:
    listed = {m.handle: m for m in client.models.embeddings.list()}
    assert listed["google_ai/gemini-embedding-001"].embedding_endpoint_type == "google_ai"
    agent = client.agents.create(model=GROQ, embedding="google_ai/gemini-embedding-001",
                                 include_base_tools=False)
    assert agent.embedding_config is not None
    assert (agent.embedding_config.embedding_endpoint_type,
            agent.embedding_config.embedding_dim) == ("google_ai", 24)
    seen = len(fake.requests)
    client.agents.passages.create(agent.id, text="The sky is blue.")
    [request] = [r for r in fake.requests[seen:] if "mbedContent" in r.path]
    assert request.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert request.headers["x-goog-api-key"] == "gemini-test"
    assert request.body["requests"][0]["model"] == "models/gemini-embedding-001"
    found = client.agents.passages.search(agent.id, query="blue sky")
    assert "The sky is blue." in str(found)
    with pytest.raises(letta_client.UnprocessableEntityError, match="not a Gemini model"):
        client.agents.create(model=GROQ, embedding="google_ai/../../v1beta/cachedContents",
                             include_base_tools=False)

    other = client.agents.create(model=GROQ, embedding="mistral/mistral-embed",
                                 include_base_tools=False)
    assert other.embedding_config is not None
    assert (other.embedding_config.embedding_endpoint_type,
            other.embedding_config.embedding_dim) == ("mistral", 16)
    seen = len(mistral.requests)
    client.agents.passages.create(other.id, text="Grass is green.")
    [request] = [r for r in mistral.requests[seen:] if r.path.endswith("/embeddings")]
    assert request.body["model"] == "mistral-embed"
    assert request.headers["authorization"] == "Bearer mistral-test"


def test_mistral_gets_tool_call_ids_it_accepts(client: Letta, script: Script,
                                              fake: FakeOpenAI, mistral: FakeOpenAI) -> None:
    client.tools.create(source_code=SHOUT)
    # The first turn's call ids are the fake OpenAI's ("call_..."), which Mistral refuses.
    agent = client.agents.create(model=GROQ, tools=["shout"], include_base_tools=False)
    script.set(call("shout", text="one"), reply("ONE."))
    client.agents.messages.create(agent.id, input="shout one")
    script.set(call("shout", text="two"), reply("It said TWO."))
    seen = len(mistral.requests)
    response = client.agents.messages.create(agent.id, input="shout two",
                                             override_model="mistral/mistral-large-latest")
    assert response.messages[-1].content == "It said TWO."  # type: ignore[union-attr]
    requests = _chat_requests(mistral, seen)
    assert [r.body["model"] for r in requests] == ["mistral-large-latest"] * 2
    sent = [m for m in requests[-1].body["messages"] if m["role"] in ("assistant", "tool")]
    ids = [c["id"] for m in sent for c in m.get("tool_calls") or ()]
    ids += [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert len(ids) == 4 and all(len(i) == 9 and i.isalnum() for i in ids), ids
    # A call and its result keep one id; the first turn's was mapped, Mistral's kept.
    results = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    calls = [c["id"] for m in sent for c in m.get("tool_calls") or ()]
    assert results == calls
    listed = client.agents.messages.list(agent.id)
    own = [m.tool_call.tool_call_id for m in listed  # type: ignore[union-attr]
           if m.message_type == "tool_call_message"]
    assert own[0].startswith("call_") and own[1] == calls[1]


# Letta 0.16.8's model_endpoint_type for each provider's models (letta/schemas/providers/),
# and the provider_type of the model_settings it derives from it (llm_config.py).
ENDPOINT_TYPES = {
    GROQ: ("groq", "groq"), TOGETHER: ("together", "together"),
    "ollama/qwen3:8b": ("openai", "openai"), "mistral/mistral-large-latest": ("openai", "openai"),
    "sglang/qwen3": ("openai", "sglang"), "google_ai/gemini-2.5-flash": ("google_ai", "google_ai"),
    "minimax/MiniMax-M2": ("minimax", "anthropic"), "xai/grok-4-0709": ("xai", "xai"),
    "deepseek/deepseek-chat": ("deepseek", "deepseek"), "zai_coding/glm-4.6": ("zai_coding", "zai"),
    "openrouter/openai/gpt-4o": ("openrouter", "openrouter"),
    "baseten/zai-org/GLM-4.6": ("baseten", "baseten"), "azure/gpt4o": ("azure", "azure"),
    "fireworks/llama-v3p1-8b-instruct": ("openai", "openai"),  # Letta has no provider for it
    "openai/gpt-4o-mini": ("openai", "openai"), "anthropic/claude-sonnet-4-5": ("anthropic",
                                                                                "anthropic"),
}


def test_agents_report_lettas_endpoint_type_for_each_provider(server: Server,
                                                              client: Letta) -> None:
    made = {handle: client.agents.create(model=handle, include_base_tools=False)
            for handle in ENDPOINT_TYPES}
    listed = {a.id: a for a in client.agents.list(limit=200)}
    for handle, (endpoint, settings) in ENDPOINT_TYPES.items():
        agent = made[handle]
        for seen in (agent, client.agents.retrieve(agent.id), listed[agent.id]):
            assert seen.llm_config.model_endpoint_type == endpoint, handle
        body = httpx.get(f"{server.url}/v1/agents/{agent.id}").json()
        assert_letta_shape("/v1/agents/{agent_id}", "get", body)
        assert body["model_settings"].get("provider_type") == settings, handle
        exported = httpx.get(f"{server.url}/v1/agents/{agent.id}/export").json()
        [config] = [a["llm_config"] for a in exported["agents"]]
        assert (config["model_endpoint_type"], config["handle"]) == (endpoint, handle)
        assert config["model_endpoint"] in (None, CATALOGUE[handle.partition("/")[0]].base_url,
                                            "https://api.anthropic.com/v1")

