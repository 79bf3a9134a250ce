"""Embeddings per agent, archive and folder, through letta-client: the model each asks for
is the one its passages and the queries searching them are embedded with, when its provider
is configured; a handle whose provider is not is a 422 naming the setting. Letta's quickstart
runs unchanged against ``stateloop serve`` with an OpenAI-compatible endpoint (a loopback
fake)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from test_cli_support import (
    Cli,
    cli,  # noqa: F401 (fixtures)
    serving,
)
from test_server_support import Server, client, fake, new_agent, script, server, settings_for  # noqa: F401 (fixtures)

MINILM = "hugging-face/all-MiniLM-L6-v2-int8"

# Letta's quickstart (docs.letta.com, self-hosted, letta-client 1.x) with its archival memory
# and filesystem guides, as a user would paste them; only the server's port differs.
QUICKSTART = '''
from letta_client import Letta

client = Letta(base_url="http://localhost:8283")

agent_state = client.agents.create(
    model="openai/gpt-4o-mini",
    embedding="openai/text-embedding-3-small",
    memory_blocks=[
        {
          "label": "human",
          "value": "The human's name is Chad. They like vibe coding."
        },
        {
          "label": "persona",
          "value": "My name is Sam, the all-knowing sentient AI."
        }
    ]
)

print(agent_state.id)

response = client.agents.messages.create(
    agent_id=agent_state.id,
    messages=[
        {
            "role": "user",
            "content": "Hey, nice to meet you, my name is Brad."
        }
    ]
)

for message in response.messages:
    print(message)

client.agents.passages.create(
    agent_id=agent_state.id,
    text="Brad prefers dark roast coffee and works at a bakery in Lisbon",
    tags=["preferences"]
)

results = client.agents.passages.search(
    agent_id=agent_state.id,
    query="What does Brad like to drink?",
    tags=["preferences"]
)

for result in results.results:
    print(result.content)

folder = client.folders.create(
    name="my_folder",
    embedding="openai/text-embedding-3-small"
)

print(folder.embedding_config.embedding_model)
'''


def test_letta_quickstart_runs_unchanged_against_stateloop_serve(
        cli: Cli, script: Script, fake: FakeOpenAI, tmp_path: Path) -> None:
    quickstart = tmp_path / "quickstart.py"
    with serving(cli) as url:
        quickstart.write_text(QUICKSTART.replace("http://localhost:8283", url))
        script.set(reply("Nice to meet you, Brad!"))
        done = subprocess.run([sys.executable, str(quickstart)], capture_output=True,
                              text=True, timeout=120, env=cli.environment(None))
        assert done.returncode == 0, done.stderr
        agent_id, *printed = done.stdout.splitlines()
        assert any("Nice to meet you, Brad!" in line for line in printed)
        assert "Brad prefers dark roast coffee and works at a bakery in Lisbon" in printed
        assert printed[-1] == "text-embedding-3-small"

        client = Letta(base_url=url, max_retries=0, timeout=30)
        agent = client.agents.retrieve(agent_id)
        assert agent.embedding == "openai/text-embedding-3-small"
        assert agent.embedding_config is not None
        assert agent.embedding_config.embedding_dim == 1536
        [passage] = client.agents.passages.list(agent_id)
        assert passage.embedding is not None and len(passage.embedding) == 1536
        assert passage.embedding_config is not None
        assert passage.embedding_config.handle == "openai/text-embedding-3-small"
    # the passage and the query went to the endpoint, with the model the agent asked for
    embedded = [r.body for r in fake.requests if r.path == "/v1/embeddings"]
    assert {body["model"] for body in embedded} == {"text-embedding-3-small"}
    assert ["What does Brad like to drink?"] in [body["input"] for body in embedded]


def test_archives_of_different_models_are_searched_each_with_its_own(
        fake: FakeOpenAI, script: Script, tmp_path: Path) -> None:
    settings = settings_for(fake, tmp_path / "models.db", embedding="minilm")
    with Server(settings) as server:
        client = Letta(base_url=server.url, max_retries=0, timeout=60)
        agent = new_agent(client, embedding="openai/text-embedding-ada-002",
                          tools=["archival_memory_insert", "archival_memory_search"])
        assert agent.embedding_config is not None
        assert (agent.embedding_config.embedding_model,
                agent.embedding_config.embedding_dim) == ("text-embedding-ada-002", 1536)
        small = client.archives.create(name="small", embedding_config={
            "embedding_endpoint_type": "openai", "embedding_model": "text-embedding-3-small",
            "embedding_dim": 256, "embedding_chunk_size": 500})
        offline = client.archives.create(name="offline", embedding=MINILM)
        plain = client.archives.create(name="plain")  # the server's default: MiniLM
        assert small.embedding_config is not None and offline.embedding_config is not None
        assert (small.embedding_config.embedding_dim,
                small.embedding_config.embedding_chunk_size) == (256, 500)
        assert offline.embedding_config.embedding_dim == 384
        assert plain.embedding_config is not None
        assert plain.embedding_config.handle == MINILM

        # the agent's own archive: made on its first insert (by its tool) with its model
        script.set(call("archival_memory_insert", content="The launch is on Friday."),
                   reply("Saved."))
        saved = client.agents.messages.create(agent.id, input="remember: launch friday")
        assert [m.status for m in saved.messages  # type: ignore[union-attr]
                if m.message_type == "tool_return_message"] == ["success"]
        for archive in (small, offline):
            client.agents.archives.attach(archive.id, agent_id=agent.id)
        client.archives.passages.create(small.id, text="The office is in Lisbon.")
        client.archives.passages.create(offline.id, text="Zebras have stripes.")

        passages = {p.text: p for p in client.agents.passages.list(agent.id)}
        sizes = {text: (len(p.embedding or []), p.embedding_config.embedding_model)
                 for text, p in passages.items() if p.embedding_config is not None}
        assert sizes == {"The launch is on Friday.": (1536, "text-embedding-ada-002"),
                         "The office is in Lisbon.": (256, "text-embedding-3-small"),
                         "Zebras have stripes.": (384, "all-MiniLM-L6-v2-int8")}

        requests_before = len(fake.requests)
        found = client.agents.passages.search(agent.id, query="Where is the office?")
        assert found.results[0].content == "The office is in Lisbon."
        assert {r.content for r in found.results} == set(passages)
        # one query per endpoint model; MiniLM's ran in process
        queried = [r.body for r in fake.requests[requests_before:]
                   if r.path == "/v1/embeddings"]
        assert sorted((b["model"], b.get("dimensions")) for b in queried) == [
            ("text-embedding-3-small", 256), ("text-embedding-ada-002", None)]
        hits = client.passages.search(archive_id=offline.id, query="striped zebras")
        assert hits[0].passage.text == "Zebras have stripes."
        assert len(hits[0].passage.embedding or []) == 384

        # a folder keeps the model it asked for: its chunks go to that model
        folder = client.folders.create(name="docs", embedding="openai/text-embedding-3-large")
        assert folder.embedding_config.embedding_dim == 3072
        client.folders.files.upload(folder.id, file=("guide.md", b"# Guide\nBake at 200C."))
        _completed(server.url, folder.id)
        chunks = [r.body for r in fake.requests if r.path == "/v1/embeddings"
                  and r.body["model"] == "text-embedding-3-large"]
        assert any("Bake at 200C." in text for body in chunks for text in body["input"])


def test_a_provider_not_configured_is_a_422_naming_the_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "STATELOOP_MODEL_BASE_URL",
                 "STATELOOP_EMBEDDING_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    from stateloop.server.settings import ServerSettings

    settings = ServerSettings(database_url=f"sqlite:///{tmp_path / 'bare.db'}")
    with Server(settings) as server:
        client = Letta(base_url=server.url, max_retries=0, timeout=60)
        asks: list[Callable[[], Any]] = [
            lambda: new_agent(client, embedding="openai/text-embedding-3-small"),
            lambda: client.archives.create(name="a", embedding="openai/text-embedding-3-small"),
            lambda: client.folders.create(name="f", embedding="openai/text-embedding-ada-002"),
            lambda: new_agent(client, embedding_config={
                "embedding_endpoint_type": "openai", "embedding_model": "text-embedding-ada-002",
                "embedding_dim": 1536})]
        for ask in asks:
            with pytest.raises(letta_client.UnprocessableEntityError,
                               match=r"set OPENAI_API_KEY \(and OPENAI_BASE_URL"):
                ask()
        assert list(client.archives.list()) == [] and list(client.folders.list()) == []
        # nothing asked for: the offline MiniLM, no endpoint needed
        agent = new_agent(client)
        assert agent.embedding_config is None
        [stored] = client.agents.passages.create(agent.id, text="Ada likes tea.")
        assert len(stored.embedding or []) == 384
        assert stored.embedding_config is not None
        assert stored.embedding_config.handle == MINILM
        found = client.agents.passages.search(agent.id, query="what does Ada drink")
        assert [r.content for r in found.results] == ["Ada likes tea."]


def test_what_cannot_be_served_is_refused_by_name(client: Letta, server: Server) -> None:
    refusals = {
        "letta/letta-free": r"Letta's hosted service",
        "anthropic/claude-3-5-sonnet": r"anthropic has no embedding models",
        "ollama/nomic-embed-text": r"set OLLAMA_BASE_URL to use ollama/ models",
        "text-embedding-3-small": r"must be 'PROVIDER/MODEL'",
    }
    for handle, message in refusals.items():
        with pytest.raises(letta_client.UnprocessableEntityError, match=message):
            new_agent(client, embedding=handle)
    configs = {
        # the server's key never goes to an endpoint a client names
        "is not this server's": {"embedding_endpoint_type": "openai",
                                 "embedding_endpoint": "http://169.254.169.254/v1",
                                 "embedding_model": "text-embedding-3-small",
                                 "embedding_dim": 1536},
        "makes 1536-dim vectors, not 256": {"embedding_endpoint_type": "openai",
                                            "embedding_model": "text-embedding-ada-002",
                                            "embedding_dim": 256},
        "makes 384-dim vectors": {"embedding_endpoint_type": "hugging-face",
                                  "embedding_model": "all-MiniLM-L6-v2-int8",
                                  "embedding_dim": 1024},
    }
    for message, config in configs.items():
        with pytest.raises(letta_client.UnprocessableEntityError, match=message) as info:
            new_agent(client, embedding_config=config)
        assert "embedding_config" in str(info.value.body)
        with pytest.raises(letta_client.UnprocessableEntityError, match=message):
            client.archives.create(name="x", embedding_config=config)


def test_a_model_the_endpoint_serves_under_its_own_name_is_measured(
        client: Letta, fake: FakeOpenAI) -> None:
    agent = new_agent(client, embedding="openai/nomic-embed-text")
    assert agent.embedding_config is not None
    assert (agent.embedding_config.embedding_model, agent.embedding_config.embedding_dim) == (
        "nomic-embed-text", 64)  # what the endpoint answered for it
    [stored] = client.agents.passages.create(agent.id, text="measured")
    assert len(stored.embedding or []) == 64


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that takes connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def test_an_endpoint_that_fails_or_hangs_is_a_clear_503_within_the_timeout(
        fake: FakeOpenAI, tmp_path: Path, silent_port: int) -> None:
    hanging = settings_for(fake, tmp_path / "hang.db", embedding="minilm",
                           embedding_base_url=f"http://127.0.0.1:{silent_port}/v1",
                           embedding_timeout=1.0)
    with Server(hanging) as server:
        client = Letta(base_url=server.url, max_retries=0, timeout=60)
        agent = new_agent(client, embedding="openai/text-embedding-3-small")
        started = time.monotonic()
        with pytest.raises(letta_client.APIStatusError, match="timed out") as info:
            client.agents.passages.create(agent.id, text="never embedded")
        assert info.value.status_code == 503
        assert time.monotonic() - started < 10  # the 1 s timeout, with room for a busy host
        assert list(client.agents.passages.list(agent.id)) == []
    with FakeOpenAI(api_key="the-right-key") as strict:
        wrong_key = settings_for(strict, tmp_path / "key.db", embedding="minilm",
                                 model_api_key="a-wrong-key")
        with Server(wrong_key) as server:
            client = Letta(base_url=server.url, max_retries=0, timeout=60)
            archive = client.archives.create(name="k", embedding="openai/text-embedding-3-small")
            with pytest.raises(letta_client.APIStatusError, match="answered 401") as info:
                client.archives.passages.create(archive.id, text="refused")
            assert info.value.status_code == 503


def test_archives_of_1536_and_384_dimensions_on_postgresql(
        pg_database: Callable[..., str], fake: FakeOpenAI, tmp_path: Path) -> None:
    settings = settings_for(fake, tmp_path / "unused.db", database_url=pg_database(),
                            embedding="minilm")
    with Server(settings) as server:
        client = Letta(base_url=server.url, max_retries=0, timeout=60)
        agent = new_agent(client, embedding="openai/text-embedding-3-small")
        offline = client.archives.create(name="offline")
        client.agents.passages.create(agent.id, text="The office is in Lisbon.")
        client.agents.archives.attach(offline.id, agent_id=agent.id)
        client.archives.passages.create(offline.id, text="Zebras have stripes.")
        sizes = sorted(len(p.embedding or []) for p in client.agents.passages.list(agent.id))
        assert sizes == [384, 1536]
        found = client.agents.passages.search(agent.id, query="where is the office")
        assert found.results[0].content == "The office is in Lisbon."
        found = client.agents.passages.search(agent.id, query="zebras stripes")
        assert found.results[0].content == "Zebras have stripes."
        assert len(found.results) == 2


def _completed(url: str, folder_id: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        files = httpx.get(f"{url}/v1/folders/{folder_id}/files").json()
        states = {f["processing_status"] for f in files}
        if states == {"completed"}:
            return
        assert "error" not in states, files
        time.sleep(0.1)
    raise AssertionError(f"the upload did not complete: {files}")


def test_changing_an_agents_embedding_changes_what_its_new_archive_is_embedded_with(
        client: Letta) -> None:
    agent = new_agent(client)
    changed = client.agents.update(agent.id, embedding="openai/text-embedding-3-large")
    assert changed.embedding == "openai/text-embedding-3-large"
    [stored] = client.agents.passages.create(agent.id, text="large")
    assert len(stored.embedding or []) == 3072
    with pytest.raises(letta_client.UnprocessableEntityError, match="Letta's hosted service"):
        client.agents.update(agent.id, embedding="letta/letta-free")
    assert client.agents.retrieve(agent.id).embedding == "openai/text-embedding-3-large"
