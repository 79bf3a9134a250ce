"""Providers added over ``/v1/providers`` (Letta's ``byok``) on SQLite: all eight
operations in Letta's shapes, an agent replying through one with its own key, the key sealed
in the database and never shown, a deleted provider named by its agents' next call, and the
requests refused (no encryption key, private URLs, taken names, oversize fields, callers
without the API's credentials)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import letta_client
import pytest
from cryptography.fernet import Fernet
from letta_client import Letta

from fake_script import Script
from letta_spec import assert_letta_shape
from patience import ANSWERS
from stateloop.llm.providers import CATALOGUE
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply
from test_server_support import Server, settings_for

KEY = "sk-byok-7f3a91"  # the key the fake provider takes
SEAL = Fernet.generate_key().decode()


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def fake(script: Script) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(script, chunk_size=4, api_key=KEY) as server:
        yield server


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("byok") / "stateloop.db"


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, db: Path) -> Iterator[Server]:
    with pytest.MonkeyPatch.context() as env:
        for variable in {v for p in CATALOGUE.values() for v in p.variables}:
            env.delenv(variable, raising=False)
        settings = settings_for(fake, db, model_api_key=KEY, encryption_key=SEAL,
                                provider_private_urls=True)  # the fake is on loopback
        with Server(settings) as running:
            yield running


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def client(server: Server, script: Script) -> Letta:
    script.set()
    return Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)


def _create(http: httpx.Client, fake: FakeOpenAI, name: str, key: str = KEY) -> dict:
    answer = http.post("/v1/providers", json={
        "name": name, "provider_type": "groq", "api_key": key, "base_url": fake.base_url,
        "profile": "ignored"})  # Letta Code sends one
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_agent_replies_through_a_provider_added_over_rest(
        http: httpx.Client, client: Letta, script: Script, fake: FakeOpenAI, db: Path) -> None:
    provider = _create(http, fake, "team-groq")
    assert_letta_shape("/v1/providers/", "post", provider)
    assert provider["provider_category"] == "byok" and provider["provider_type"] == "groq"
    assert KEY not in http.get(f"/v1/providers/{provider['id']}").text
    agent = client.agents.create(model="team-groq/fake-model", include_base_tools=False)
    assert agent.model == "team-groq/fake-model"
    # Letta's endpoint type is its provider type's, in the agent and in its Agent File
    assert agent.llm_config.model_endpoint_type == "groq"
    assert client.agents.retrieve(agent.id).llm_config.model_endpoint_type == "groq"
    [exported] = http.get(f"/v1/agents/{agent.id}/export").json()["agents"]
    assert (exported["llm_config"]["model_endpoint_type"],
            exported["llm_config"]["provider_category"]) == ("groq", "byok")
    script.set(reply("Hello from my own key."))
    seen = len(fake.requests)
    answer = client.agents.messages.create(agent.id, input="hi")
    assert answer.messages[-1].content == "Hello from my own key."  # type: ignore[union-attr]
    calls = [r for r in fake.requests[seen:] if r.path.endswith("/chat/completions")]
    assert [r.body["model"] for r in calls] == ["fake-model"]
    assert calls[0].headers["authorization"] == f"Bearer {KEY}"
    # at rest: sealed with the operator's key, never in clear
    with sqlite3.connect(db) as conn:
        sealed, = conn.execute("SELECT api_key_sealed FROM providers WHERE name = ?",
                               ("team-groq",)).fetchone()
        assert KEY.encode() not in b"".join(
            str(cell).encode() for row in conn.execute("SELECT * FROM providers")
            for cell in row)
    assert Fernet(SEAL.encode()).decrypt(sealed.encode()).decode() == KEY


def test_providers_list_retrieve_modify_check_refresh_and_delete(
        http: httpx.Client, fake: FakeOpenAI) -> None:
    provider = _create(http, fake, "lister", key="sk-wrong")
    listed = http.get("/v1/providers", params={"provider_category": "byok"}).json()
    assert_letta_shape("/v1/providers/", "get", listed)
    assert "lister" in {p["name"] for p in listed}
    assert {p["provider_category"] for p in listed} == {"byok"}
    assert "sk-wrong" not in http.get("/v1/providers").text
    assert [p["id"] for p in http.get("/v1/providers", params={"name": "lister"}).json()] == [
        provider["id"]]
    base = http.get("/v1/providers", params={"provider_category": "base"}).json()
    assert base and {p["provider_category"] for p in base} == {"base"}
    one = http.get(f"/v1/providers/{provider['id']}")
    assert_letta_shape("/v1/providers/{provider_id}", "get", one.json())
    # the stored key is wrong: check says so, without echoing it
    refused = http.post(f"/v1/providers/{provider['id']}/check")
    assert refused.status_code == 401 and "sk-wrong" not in refused.text
    assert http.patch(f"/v1/providers/{provider['id']}/refresh").status_code == 401
    changed = http.patch(f"/v1/providers/{provider['id']}", json={"api_key": KEY,
                                                                  "region": "eu"})
    assert changed.status_code == 200 and changed.json()["region"] == "eu"
    assert_letta_shape("/v1/providers/{provider_id}", "patch", changed.json())
    assert http.post(f"/v1/providers/{provider['id']}/check").json() == {
        "message": "Valid api key for provider_type=groq"}
    refreshed = http.patch(f"/v1/providers/{provider['id']}/refresh")
    assert refreshed.status_code == 200 and refreshed.json()["name"] == "lister"
    gone = http.delete(f"/v1/providers/{provider['id']}")
    assert gone.status_code == 200
    assert http.get(f"/v1/providers/{provider['id']}").status_code == 404
    assert http.delete(f"/v1/providers/{provider['id']}").status_code == 404


def test_check_tries_a_key_without_storing_it(http: httpx.Client, fake: FakeOpenAI) -> None:
    body = {"provider_type": "openrouter", "base_url": fake.base_url}
    ok = http.post("/v1/providers/check", json={**body, "api_key": KEY})
    assert ok.status_code == 200 and ok.json()["message"].endswith("openrouter")
    bad = http.post("/v1/providers/check", json={**body, "api_key": "sk-nope"})
    assert bad.status_code == 401 and "sk-nope" not in bad.text
    assert "openrouter" not in {p["provider_type"] for p in http.get("/v1/providers").json()}
    anthropic = http.post("/v1/providers/check", json={
        "provider_type": "anthropic", "api_key": KEY, "base_url": fake.url})
    assert anthropic.status_code == 200, anthropic.text


def test_a_deleted_providers_agents_are_told_which_handle_failed(
        http: httpx.Client, client: Letta, script: Script, fake: FakeOpenAI) -> None:
    provider = _create(http, fake, "short-lived")
    agent = client.agents.create(model="short-lived/fake-model", include_base_tools=False)
    assert http.delete(f"/v1/providers/{provider['id']}").status_code == 200
    script.set(reply("never sent"))
    answer = http.post(f"/v1/agents/{agent.id}/messages",
                       json={"messages": [{"role": "user", "content": "hi"}]})
    assert answer.status_code == 400, answer.text
    assert "'short-lived/fake-model'" in answer.json()["detail"]
    assert "provider 'short-lived' was deleted" in answer.json()["detail"]
    again = http.post("/v1/agents", json={"model": "short-lived/fake-model"})
    assert again.status_code == 422 and "'short-lived' was deleted" in again.text


def test_operator_providers_are_read_only(http: httpx.Client) -> None:
    base = http.get("/v1/providers", params={"provider_category": "base"}).json()[0]
    changed = http.patch(f"/v1/providers/{base['id']}", json={"api_key": "x"})
    assert changed.status_code == 400 and "environment" in changed.json()["detail"]
    assert http.delete(f"/v1/providers/{base['id']}").status_code == 400


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"name": "groq"}, 409, "taken"),  # a catalogue prefix
    ({"name": "has/slash"}, 422, "name"),
    ({"api_key": KEY + "k" * 5000}, 422, "api_key"),  # never quoted back
    ({"api_key": KEY + "é"}, 422, "visible ASCII"),  # it goes in a header
    ({"base_url": "http://x/" + "a" * 3000}, 422, "base_url"),
    ({"provider_type": "bedrock"}, 422, "SigV4"),
    ({"provider_type": "nonsense"}, 422, "one of"),
    ({"base_url": "ftp://example.com"}, 422, "http"),
])
def test_bad_providers_are_refused_naming_the_problem(
        http: httpx.Client, fake: FakeOpenAI, body: dict, status: int, words: str) -> None:
    answer = http.post("/v1/providers", json={
        "name": "fine", "provider_type": "groq", "api_key": KEY, "base_url": fake.base_url,
        **body})
    assert answer.status_code == status, answer.text
    assert words in answer.text and KEY not in answer.text


def test_a_taken_name_is_a_conflict(http: httpx.Client, fake: FakeOpenAI) -> None:
    _create(http, fake, "twice")
    again = http.post("/v1/providers", json={"name": "twice", "provider_type": "groq",
                                             "api_key": KEY})
    assert again.status_code == 409


def test_without_an_encryption_key_or_the_opt_in_keys_and_private_urls_are_refused(
        fake: FakeOpenAI, tmp_path: Path) -> None:
    settings = settings_for(fake, tmp_path / "plain.db", api_keys=["letmein"])
    with Server(settings) as running, httpx.Client(base_url=running.url) as http:
        body = {"name": "mine", "provider_type": "groq", "api_key": KEY}
        assert http.post("/v1/providers", json=body).status_code == 401  # no credentials
        auth = {"authorization": "Bearer letmein"}
        refused = http.post("/v1/providers", json=body, headers=auth)
        assert refused.status_code == 400 and "STATELOOP_ENCRYPTION_KEY" in refused.text
        private = http.post("/v1/providers", json={**body, "base_url": fake.base_url},
                            headers=auth)
        assert private.status_code == 403, private.text
        assert "STATELOOP_PROVIDER_PRIVATE_URLS" in private.text
        assert http.get("/v1/providers", params={"provider_category": "byok"},
                        headers=auth).json() == []
    with sqlite3.connect(tmp_path / "plain.db") as conn:
        assert conn.execute("SELECT count(*) FROM providers").fetchone() == (0,)


def test_models_lists_what_each_added_provider_offers(http: httpx.Client,
                                                      fake: FakeOpenAI) -> None:
    provider = _create(http, fake, "listed")
    models = http.get("/v1/models", params={"provider_category": "byok"}).json()
    assert_letta_shape("/v1/models/", "get", models)
    mine = [m for m in models if m["provider_name"] == "listed"]
    assert [(m["handle"], m["provider_type"], m["provider_category"]) for m in mine] == [
        ("listed/fake-model", "groq", "byok")]
    assert mine[0]["model_endpoint"] is None  # an address a user gave is not shown
    base = http.get("/v1/models", params={"provider_category": "base"}).json()
    assert base and not [m for m in base if m["provider_category"] != "base"]
    assert "listed/fake-model" not in {m["handle"] for m in base}
    assert http.patch(f"/v1/providers/{provider['id']}/refresh").status_code == 200
    assert http.delete(f"/v1/providers/{provider['id']}").status_code == 200
    after = http.get("/v1/models", params={"provider_category": "byok"}).json()
    assert "listed/fake-model" not in {m["handle"] for m in after}


def _listed(http: httpx.Client, provider: str) -> set[str]:
    """The handles of ``provider``'s models on /v1/models, once its listing is read."""
    deadline = time.monotonic() + ANSWERS
    while True:
        found = {m["handle"] for m in http.get("/v1/models", params={
            "provider_category": "byok", "provider_name": provider}).json()}
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_anthropic_and_azure_providers_list_their_models_in_their_own_formats(
        http: httpx.Client, client: Letta, fake: FakeOpenAI, script: Script) -> None:
    claude = http.post("/v1/providers", json={
        "name": "team-claude", "provider_type": "anthropic", "api_key": KEY,
        "base_url": fake.url})
    azure = http.post("/v1/providers", json={
        "name": "team-azure", "provider_type": "azure", "api_key": KEY, "base_url": fake.url,
        "api_version": "2024-10-21"})
    assert claude.status_code == azure.status_code == 200, (claude.text, azure.text)
    assert _listed(http, "team-claude") == {
        "team-claude/claude-sonnet-4-5-20250929", "team-claude/claude-haiku-4-5-20251001",
        "team-claude/claude-opus-4-1-20250805"}
    # Azure's deployments, asked for with its api-key header (the fake refuses a Bearer key)
    assert _listed(http, "team-azure") == {"team-azure/fake-deployment"}
    for provider in (claude.json(), azure.json()):
        assert http.post(f"/v1/providers/{provider['id']}/check").status_code == 200
        assert http.patch(f"/v1/providers/{provider['id']}/refresh").status_code == 200
    wrong = http.post("/v1/providers/check", json={
        "provider_type": "azure", "api_key": "sk-wrong", "base_url": fake.url})
    assert wrong.status_code == 401, wrong.text
    agent = client.agents.create(model="team-azure/fake-deployment", include_base_tools=False)
    script.set(reply("From a deployment."))
    seen = len(fake.requests)
    answer = client.agents.messages.create(agent.id, input="hi")
    assert answer.messages[-1].content == "From a deployment."  # type: ignore[union-attr]
    [sent] = [r for r in fake.requests[seen:] if r.path.endswith("/chat/completions")]
    assert sent.path == "/openai/deployments/fake-deployment/chat/completions"
    assert sent.headers["api-key"] == KEY
    # its embedding deployments too: listed, and called with the key in api-key
    embedding = {m.handle: m for m in client.models.embeddings.list()}["team-azure/fake-embedding"]
    assert (embedding.provider_type, embedding.embedding_endpoint_type) == ("azure", "azure")
    embedded = client.agents.create(model="team-azure/fake-deployment",
                                    embedding="team-azure/fake-embedding",
                                    include_base_tools=False)
    seen = len(fake.requests)
    client.agents.passages.create(embedded.id, text="Deployed embeddings.")
    [sent] = [r for r in fake.requests[seen:] if r.path.endswith("/embeddings")]
    assert sent.path == "/openai/deployments/fake-embedding/embeddings"
    assert (sent.headers["api-key"], sent.body["input"]) == (KEY, ["Deployed embeddings."])
    for provider in (claude.json(), azure.json()):
        assert http.delete(f"/v1/providers/{provider['id']}").status_code == 200



def test_a_gemini_providers_embedding_models_are_listed_and_used(
        http: httpx.Client, client: Letta, fake: FakeOpenAI) -> None:
    added = http.post("/v1/providers", json={
        "name": "team-gemini", "provider_type": "google_ai", "api_key": KEY,
        "base_url": fake.url})
    assert added.status_code == 200, added.text
    deadline = time.monotonic() + ANSWERS
    while True:
        listed = {m.handle: m for m in client.models.embeddings.list()}
        if "team-gemini/gemini-embedding-001" in listed or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    model = listed["team-gemini/gemini-embedding-001"]
    assert (model.provider_name, model.provider_type, model.embedding_endpoint_type,
            model.embedding_endpoint) == ("team-gemini", "google_ai", "google_ai", None)
    assert "team-gemini/gemini-2.5-flash" not in listed  # a chat model
    assert_letta_shape("/v1/models/embedding", "get", http.get("/v1/models/embedding").json())
    agent = client.agents.create(model="team-gemini/gemini-2.5-flash",
                                 embedding="team-gemini/gemini-embedding-001",
                                 include_base_tools=False)
    assert agent.embedding_config is not None
    assert (agent.embedding_config.handle, agent.embedding_config.embedding_endpoint_type,
            agent.embedding_config.embedding_dim) == (
        "team-gemini/gemini-embedding-001", "google_ai", 768)
    seen = len(fake.requests)
    client.agents.passages.create(agent.id, text="The sky is blue.")
    [request] = [r for r in fake.requests[seen:] if r.path.endswith(":batchEmbedContents")]
    assert request.headers["x-goog-api-key"] == KEY
    assert "The sky is blue." in str(client.agents.passages.search(agent.id, query="sky"))
    assert http.delete(f"/v1/providers/{added.json()['id']}").status_code == 200
    with pytest.raises(letta_client.APIStatusError, match="team-gemini"):
        client.agents.passages.create(agent.id, text="Its provider is gone.")


def test_providers_are_listed_by_creation_as_letta_lists_them(
        http: httpx.Client, fake: FakeOpenAI) -> None:
    # Named against their order of creation, so a list by name would differ.
    made = [_create(http, fake, name)["id"] for name in ("order-c", "order-a", "order-b")]

    def ids(**params: str) -> list[str]:
        answer = http.get("/v1/providers", params={"provider_category": "byok", **params})
        assert answer.status_code == 200, answer.text
        return [p["id"] for p in answer.json() if p["id"] in made]

    assert ids() == made[::-1]  # newest first, Letta's default
    assert ids(order="desc", order_by="created_at") == made[::-1]
    assert ids(order="asc") == made
    assert ids(order="asc", after=made[0]) == made[1:]
    assert ids(order="desc", before=made[0]) == made[:0:-1]
    everything = http.get("/v1/providers", params={"order": "asc"}).json()
    categories = [p["provider_category"] for p in everything]
    assert categories == sorted(categories)  # the operator's ("base") before those added
    refused = http.get("/v1/providers", params={"order_by": "name"})
    assert refused.status_code == 422 and "order_by" in refused.text
    for provider_id in made:
        assert http.delete(f"/v1/providers/{provider_id}").status_code == 200

def test_the_number_of_providers_is_bounded(http: httpx.Client, fake: FakeOpenAI,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from stateloop.server.routes import providers

    count = len(http.get("/v1/providers", params={"provider_category": "byok"}).json())
    monkeypatch.setattr(providers, "MAX_PROVIDERS", count)  # the server runs in this process
    refused = http.post("/v1/providers", json={"name": "one-more", "provider_type": "groq",
                                               "api_key": KEY})
    assert refused.status_code == 400 and f"at most {count} providers" in refused.text


def test_the_operator_key_comes_from_the_setting_or_a_file(tmp_path: Path) -> None:
    from stateloop.server.services.byok import KeyBox, KeyUnavailable
    from stateloop.server.settings import ServerSettings

    sealed = KeyBox(ServerSettings(encryption_key=SEAL)).seal(KEY)
    assert sealed is not None and KEY not in sealed
    held = tmp_path / "seal"
    held.write_text(SEAL + "\n")
    assert KeyBox(ServerSettings(encryption_key_file=str(held))).open(sealed) == KEY
    other = KeyBox(ServerSettings(encryption_key=Fernet.generate_key().decode()))
    with pytest.raises(KeyUnavailable, match="sealed with another STATELOOP_ENCRYPTION_KEY"):
        other.open(sealed)
    assert "not a Fernet key" in str(KeyBox(ServerSettings(encryption_key="short")).problem)
    missing = KeyBox(ServerSettings(encryption_key_file=str(tmp_path / "nowhere")))
    assert "STATELOOP_ENCRYPTION_KEY_FILE cannot be read" in str(missing.problem)


def test_a_provider_whose_address_turned_private_is_not_called(
        fake: FakeOpenAI, script: Script, tmp_path: Path) -> None:
    settings = settings_for(fake, tmp_path / "turned.db", model_api_key=KEY,
                            encryption_key=SEAL)  # private addresses not allowed
    with Server(settings) as running, httpx.Client(base_url=running.url, timeout=30) as http:
        with sqlite3.connect(tmp_path / "turned.db") as conn:  # as if its name moved
            conn.execute(
                "INSERT INTO providers (id, name, provider_type, base_url, api_key_sealed, "
                "created_at, updated_at) VALUES ('provider-1', 'moved', 'groq', ?, ?, 0, 0)",
                (fake.base_url, Fernet(SEAL.encode()).encrypt(KEY.encode()).decode()))
        agent = http.post("/v1/agents", json={"model": "moved/fake-model",
                                              "include_base_tools": False})
        assert agent.status_code == 200, agent.text
        script.set(reply("never sent"))
        seen = len(fake.requests)
        answer = http.post(f"/v1/agents/{agent.json()['id']}/messages",
                           json={"messages": [{"role": "user", "content": "hi"}]})
        assert answer.status_code == 400, answer.text
        assert "STATELOOP_PROVIDER_PRIVATE_URLS" in answer.json()["detail"]
        assert len(fake.requests) == seen

