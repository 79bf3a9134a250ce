"""Tags, models, readiness, counts and a block's agents, through letta-client where it has
the method and plain HTTP otherwise; every answer is checked against Letta's document."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import uuid

import httpx
import letta_client
import pytest
from letta_client import Letta

from letta_spec import assert_letta_shape
from stateloop import __version__
from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

SOURCE = '''
def {name}(text: str) -> str:
    """Echo it.

    Args:
        text: What to echo.
    """
    return text
'''


def _get(server: Server, path: str, **params: object) -> httpx.Response:
    response = httpx.get(f"{server.url}{path}", params=params)  # type: ignore[arg-type]
    assert response.status_code == 200, response.text
    return response


def test_tags_are_listed_alphabetically_with_cursors_and_a_name_filter(
        server: Server, client: Letta) -> None:
    key = uuid.uuid4().hex[:8]
    new_agent(client, tags=[f"{key}-b", f"{key}-shared"])
    new_agent(client, tags=[f"{key}-a", f"{key}-shared"])
    assert client.tags.list(name=key) == [f"{key}-a", f"{key}-b", f"{key}-shared"]
    assert client.tags.list(name=key, order="desc", limit=2) == [f"{key}-shared", f"{key}-b"]
    assert client.tags.list(name=key, after=f"{key}-a") == [f"{key}-b", f"{key}-shared"]
    assert client.tags.list(name=key, before=f"{key}-shared") == [f"{key}-a", f"{key}-b"]
    assert client.tags.list(query_text=key.upper()) == client.tags.list(name=key)
    assert_letta_shape("/v1/tags/", "get", _get(server, "/v1/tags/").json())


def test_models_list_the_default_and_those_agents_use(server: Server, client: Letta) -> None:
    new_agent(client, model="openai/gpt-4.1-mini")
    models = {m.handle: m for m in client.models.list()}
    assert {"openai/gpt-4o-mini", "openai/gpt-4.1-mini"} <= set(models)
    assert models["openai/gpt-4o-mini"].max_context_window == 128_000
    assert models["openai/gpt-4o-mini"].provider_type == "openai"
    assert client.models.list(provider_type="anthropic") == []
    assert client.models.list(provider_category=["byok"]) == []
    assert_letta_shape("/v1/models/", "get", _get(server, "/v1/models/").json())


def test_embedding_models_are_the_default_then_those_to_be_had(server: Server,
                                                               client: Letta) -> None:
    models = client.models.embeddings.list()
    assert (models[0].name, models[0].embedding_dim) == ("text-embedding-3-small", 1536)
    assert [(m.handle, m.embedding_dim) for m in models[1:]] == [
        ("hugging-face/all-MiniLM-L6-v2-int8", 384), ("openai/text-embedding-3-large", 3072),
        ("openai/text-embedding-ada-002", 1536)]
    for model in models:  # each is a handle an agent may ask for
        assert client.agents.create(model="openai/gpt-4o-mini", embedding=model.handle,
                                    include_base_tools=False).embedding == model.handle
    assert_letta_shape("/v1/models/embedding", "get",
                       _get(server, "/v1/models/embedding").json())


def test_ready_answers_like_health(server: Server) -> None:
    for path in ("/v1/ready", "/v1/ready/"):
        body = _get(server, path).json()
        assert body == {"status": "ok", "version": "0.16.8", "stateloop_version": __version__}
        assert_letta_shape("/v1/ready/", "get", body)


def test_agents_are_counted_by_name_tags_and_text(server: Server, client: Letta) -> None:
    key = uuid.uuid4().hex[:8]
    new_agent(client, name=f"{key}-alpha", tags=[f"{key}-x", f"{key}-y"])
    new_agent(client, name=f"{key}-beta", tags=[f"{key}-x"])
    total = _get(server, "/v1/agents/count").json()
    assert total == len(client.agents.list(limit=1000).items)
    assert _get(server, "/v1/agents/count", name=f"{key}-beta").json() == 1
    assert _get(server, "/v1/agents/count", tags=f"{key}-x").json() == 2
    assert _get(server, "/v1/agents/count", tags=[f"{key}-x", f"{key}-y"],
                match_all_tags="true").json() == 1
    assert _get(server, "/v1/agents/count", query_text=f"{key.upper()}-AL").json() == 1
    assert_letta_shape("/v1/agents/count", "get", total)


def test_blocks_are_counted_by_label(server: Server, client: Letta) -> None:
    label = f"notes_{uuid.uuid4().hex[:8]}"
    for _ in range(2):
        client.blocks.create(label=label, value="v")
    assert _get(server, "/v1/blocks/count", label=label).json() == 2
    total = _get(server, "/v1/blocks/count").json()
    assert total >= 2
    assert _get(server, "/v1/blocks/count", templates_only="true").json() == 0
    assert_letta_shape("/v1/blocks/count", "get", total)


def test_tools_are_counted_with_lettas_filters(server: Server, client: Letta) -> None:
    key = uuid.uuid4().hex[:8]
    made = [client.tools.upsert(source_code=SOURCE.format(name=f"echo_{key}_{i}"))
            for i in range(2)]
    every = len(client.tools.list(limit=1000).items)
    assert _get(server, "/v1/tools/count").json() == every
    assert _get(server, "/v1/tools/count", search=f"ECHO_{key}").json() == 2
    assert _get(server, "/v1/tools/count", names=f"{made[0].name},nope").json() == 1
    assert _get(server, "/v1/tools/count", tool_ids=[made[1].id]).json() == 1
    letta = _get(server, "/v1/tools/count", return_only_letta_tools="true").json()
    assert letta > 0
    assert _get(server, "/v1/tools/count", exclude_letta_tools="true").json() == every - letta
    assert_letta_shape("/v1/tools/count", "get", every)


def test_a_shared_blocks_agents_newest_first(server: Server, client: Letta) -> None:
    block = client.blocks.create(label="team", value="shared")
    agents = [new_agent(client) for _ in range(3)]
    for agent in agents:
        client.agents.blocks.attach(block.id, agent_id=agent.id)
    listed = client.blocks.agents.list(block.id, include=["agent.blocks"])
    assert [a.id for a in listed] == [a.id for a in reversed(agents)]
    assert "team" in {b.label for b in listed.items[0].memory.blocks}
    page = client.blocks.agents.list(block.id, order="asc", after=agents[0].id, limit=1)
    assert [a.id for a in page.items] == [agents[1].id]
    with pytest.raises(letta_client.NotFoundError):
        client.blocks.agents.list("block-00000000-0000-4000-8000-000000000000")
    body = _get(server, f"/v1/blocks/{block.id}/agents").json()
    assert [a["id"] for a in body] == [a.id for a in reversed(agents)]
