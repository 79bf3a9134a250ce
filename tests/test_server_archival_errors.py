"""Archival memory over REST when nothing can embed: a 503 that names the problem, from
insert and from search (of an archive stored when the model was there), and the agent's
other routes unaffected."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import letta_client
import pytest
from letta_client import Letta

from stateloop.memory import embedding_models, embeddings
from stateloop.store import PassageRecord, open_store
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, fake, new_agent, script, settings_for

__all__ = ["fake", "script"]  # module fixtures used by name


@pytest.fixture
def no_model(fake: FakeOpenAI, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """A server on the offline embedder whose model file is not there."""
    absent = tmp_path / "absent" / "model.onnx"
    monkeypatch.setattr(embedding_models, "default_embedder",
                        lambda: embeddings.MiniLMEmbedder(model_file=absent))
    with Server(settings_for(fake, tmp_path / "db.sqlite", embedding="minilm")) as server:
        yield server


async def _store_a_passage(db: Path, agent_id: str) -> None:
    """A passage embedded earlier, when the model was there."""
    store = await open_store(f"sqlite:///{db}")
    try:
        archive_id = await store.default_archive(agent_id)
        await store.insert_passages(archive_id, [PassageRecord(
            archive_id, "the launch is on Tuesday", embedding=[1.0] + [0.0] * 383,
            embedding_model=embeddings.MiniLMEmbedder.MODEL)])
    finally:
        await store.close()


def test_a_missing_embedding_model_is_a_503_naming_it(no_model: Server, tmp_path: Path) -> None:
    client = Letta(base_url=no_model.url, api_key="unused", max_retries=0, timeout=30)
    agent = new_agent(client)
    with pytest.raises(letta_client.APIStatusError) as raised:
        client.agents.passages.create(agent.id, text="the launch is on Tuesday")
    assert raised.value.status_code == 503
    asyncio.run(_store_a_passage(tmp_path / "db.sqlite", agent.id))
    url = f"{no_model.url}/v1/agents/{agent.id}/archival-memory"
    with httpx.Client() as http:
        for response in (http.post(url, json={"text": "x"}),
                         http.get(f"{url}/search", params={"query": "launch"})):
            assert response.status_code == 503
            assert "model file" in response.json()["detail"]
            assert "absent/model.onnx is missing" in response.json()["detail"]
        # nothing half-stored; listing needs no model
        assert [p["text"] for p in http.get(url).json()] == ["the launch is on Tuesday"]
    assert client.agents.retrieve(agent.id).id == agent.id
