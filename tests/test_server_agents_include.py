"""An agent's relationships as Letta 0.16.8 serves them: a 1.x SDK (letta-client) gets
none unless ``include`` names them; any other caller (the web page, curl, an older SDK)
gets every one, or those the legacy ``include_relationships`` names."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from typing import Any

import httpx
import pytest
from letta_client import Letta

from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

EVERY = ["agent.blocks", "agent.identities", "agent.managed_group", "agent.pending_approval",
         "agent.secrets", "agent.sources", "agent.tags", "agent.tools"]


@pytest.fixture(scope="module")
def made(server: Server) -> dict[str, Any]:
    """An agent with blocks, tools, tags, an identity and a tool variable."""
    client = Letta(base_url=server.url)
    created = httpx.post(f"{server.url}/v1/identities/", json={
        "identifier_key": "include-user", "name": "U", "identity_type": "user"})
    assert created.status_code == 200, created.text
    identity = created.json()["id"]
    agent = new_agent(client, name="include-agent", tags=["include"],
                      memory_blocks=[{"label": "human", "value": "Ada"}],
                      tools=["archival_memory_search"], identity_ids=[identity],
                      secrets={"TOKEN": "t"})
    return {"id": agent.id, "identity": identity}


def _raw(server: Server, path: str, **headers: str) -> dict[str, Any]:
    response = httpx.get(server.url + path, headers=headers)
    assert response.status_code == 200, response.text
    body = response.json()
    return body[0] if isinstance(body, list) else body


def test_letta_client_gets_no_relationships_unless_it_names_them(server: Server,
                                                                 made: dict[str, Any]) -> None:
    client = Letta(base_url=server.url)
    lean = client.agents.retrieve(made["id"])
    assert (lean.blocks, lean.tools, lean.tags, lean.identities, lean.secrets) == (
        [], [], [], [], [])
    assert lean.memory.blocks == [] and lean.managed_group is None
    # What Letta always includes stays.
    assert lean.name == "include-agent" and lean.system and lean.message_ids
    assert lean.llm_config.model == "gpt-4o-mini" and lean.model == "openai/gpt-4o-mini"
    [listed] = client.agents.list(name="include-agent").items
    assert listed.blocks == [] and listed.tools == [] and listed.tags == []

    some = client.agents.retrieve(made["id"], include=["agent.blocks", "agent.tools"])
    assert [b.label for b in some.blocks] == ["human"] == [b.label for b in some.memory.blocks]
    assert [t.name for t in some.tools] == ["archival_memory_search"]
    assert some.tags == ["include"]  # Letta loads tags with the blocks
    assert some.identities == [] and some.secrets == []
    full = client.agents.list(name="include-agent", include=EVERY).items[0]
    assert [i.id for i in full.identities] == [made["identity"]]
    assert [s.key for s in full.secrets] == ["TOKEN"] and full.blocks and full.tools


def test_other_callers_get_every_relationship_as_before(server: Server,
                                                        made: dict[str, Any]) -> None:
    path = f"/v1/agents/{made['id']}"
    for agent in ("curl/8.5.0", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
                  "letta-client/0.1.300"):  # an SDK before 1.0
        full = _raw(server, path, **{"User-Agent": agent})
        assert [b["label"] for b in full["blocks"]] == ["human"], agent
        assert full["tools"] and full["tags"] == ["include"] and full["identities"]
        assert [s["key"] for s in full["secrets"]] == ["TOKEN"]
    for agent in ("letta-client/1.2.0", "@letta-ai/letta-client/1.0.0-alpha.3"):
        assert _raw(server, path, **{"User-Agent": agent})["blocks"] == [], agent
    # The legacy parameter names what to include, in its own words.
    memory = _raw(server, "/v1/agents?name=include-agent&include_relationships=memory",
                  **{"User-Agent": "curl/8.5.0"})
    assert memory["blocks"] and memory["tags"] == ["include"] and memory["tools"] == []


def test_an_unknown_relationship_is_refused(server: Server, made: dict[str, Any]) -> None:
    response = httpx.get(f"{server.url}/v1/agents/{made['id']}?include=agent.everything")
    assert response.status_code == 422
    assert "include" in response.text and "agent.blocks" in response.text


@pytest.mark.parametrize("path", ["/v1/blocks/{block}/agents", "/v1/identities/{identity}/agents"])
def test_lists_of_agents_take_include(server: Server, made: dict[str, Any], path: str) -> None:
    client = Letta(base_url=server.url)
    block = client.agents.blocks.retrieve("human", agent_id=made["id"]).id
    url = path.format(block=block, identity=made["identity"])
    sdk = {"X-Stainless-Package-Version": "1.12.1"}
    assert _raw(server, url, **sdk)["blocks"] == []
    assert _raw(server, url + "?include=agent.blocks", **sdk)["blocks"]
    assert _raw(server, url, **{"User-Agent": "curl/8.5.0"})["blocks"]
