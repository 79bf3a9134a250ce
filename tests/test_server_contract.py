"""The server answers as its OpenAPI document says: declared statuses, 422s in FastAPI's
shape naming the field, and no 500 for requests the fuzz test once found breaking a route."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from letta_spec import letta_operation
from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

SCHEMA = 60  # seconds: a new server builds its OpenAPI document on the first request

SHOUT = '''
def shout(text: str) -> str:
    """Say it loudly.

    Args:
        text: What to say.
    """
    return text.upper()
'''


def _field_error(response: httpx.Response, *loc: str) -> dict[str, Any]:
    """The 422's error for this field, in FastAPI's shape (what the document declares)."""
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list), detail
    matching = [e for e in detail if tuple(e["loc"][:len(loc)]) == loc]
    assert matching, detail
    return matching[0]


def test_errors_are_declared_for_every_route_that_answers_them(server: Server) -> None:
    spec = httpx.get(f"{server.url}/openapi.json", timeout=SCHEMA).json()
    paths = spec["paths"]
    assert set(paths["/v1/agents/{agent_id}"]["get"]["responses"]) >= {"200", "404", "422"}
    assert set(paths["/v1/agents"]["post"]["responses"]) >= {"404", "409", "422"}
    assert set(paths["/v1/agents/{agent_id}/messages"]["post"]["responses"]) >= {
        "400", "404", "409", "422"}
    for method in ("post", "put"):  # 503: source tools refused where no sandbox can run
        assert set(paths["/v1/tools"][method]["responses"]) >= {"409", "422", "503"}
    assert "503" in paths["/v1/tools/{tool_id}"]["patch"]["responses"]
    assert paths["/v1/runs/{run_id}"]["get"]["responses"]["404"]["content"][
        "application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert spec["components"]["schemas"]["ErrorBody"]["required"] == ["detail"]
    for path in ("/v1/agents/{agent_id}/messages", "/v1/agents/{agent_id}/messages/stream",
                 "/v1/runs/{run_id}/stream"):
        assert "text/event-stream" in paths[path]["post"]["responses"]["200"]["content"]


def test_tool_update_with_null_tags_keeps_them(client: Letta) -> None:
    tool = client.tools.upsert(source_code=SHOUT, tags=["loud"])
    updated = client.tools.update(tool.id, tags=None, description="Louder.")
    assert updated.tags == ["loud"] and updated.description == "Louder."
    assert client.tools.retrieve(tool.id).tags == ["loud"]


def test_block_limit_beyond_64_bits_is_422_naming_limit(server: Server, client: Letta) -> None:
    block = client.blocks.create(label="big", value="v")
    response = httpx.patch(f"{server.url}/v1/blocks/{block.id}", json={"limit": 2**80})
    _field_error(response, "body", "limit")
    assert client.blocks.retrieve(block.id).limit == block.limit


def test_value_over_block_limit_is_422_in_fastapis_shape(server: Server,
                                                         client: Letta) -> None:
    block = client.blocks.create(label="small", value="v", limit=5)
    response = httpx.patch(f"{server.url}/v1/blocks/{block.id}", json={"value": "x" * 50})
    assert "limit" in _field_error(response, "body")["msg"]


def test_agent_block_renamed_through_the_agent_route(client: Letta) -> None:
    agent = new_agent(client)
    renamed = client.agents.blocks.update("human", agent_id=agent.id, label="user", limit=50)
    assert renamed.label == "user" and renamed.limit == 50
    assert client.agents.blocks.retrieve("user", agent_id=agent.id).value == "Name: Ada"
    with pytest.raises(letta_client.NotFoundError):
        client.agents.blocks.retrieve("human", agent_id=agent.id)


def test_archival_search_with_a_bad_date_names_the_parameter(server: Server,
                                                             client: Letta) -> None:
    agent = new_agent(client)
    response = httpx.get(f"{server.url}/v1/agents/{agent.id}/archival-memory/search",
                         params={"query": "tea", "start_datetime": "-"})
    assert "ISO 8601" in _field_error(response, "query", "start_datetime")["msg"]


def test_response_shapes_are_declared_with_lettas_names(server: Server) -> None:
    spec = httpx.get(f"{server.url}/openapi.json", timeout=SCHEMA).json()
    ok = spec["paths"]["/v1/blocks/{block_id}"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Block"}
    agent = spec["components"]["schemas"]["AgentState"]
    assert {"id", "name", "llm_config", "memory", "tools", "blocks"} <= set(agent["required"])


def test_page_size_beyond_64_bits_is_422_naming_limit(server: Server, client: Letta) -> None:
    agent = new_agent(client)
    client.agents.passages.create(agent.id, text="tea")
    url = f"{server.url}/v1/agents/{agent.id}/archival-memory"
    _field_error(httpx.get(url, params={"limit": str(2**70)}), "query", "limit")
    assert len(httpx.get(url, params={"limit": str(2**63 - 1)}).json()) == 1


# Operations stateloop serves beyond Letta's API: steering, sending to a group, which
# older Letta clients call (0.16.8's document no longer lists it), memory history, and the
# routes of Letta's cloud that Letta Code reads.
BEYOND_LETTA = {("post", "/v1/agents/{agent_id}/messages/steer"),
                ("get", "/v1/agents/{agent_id}/secrets"),
                ("get", "/v1/agents/{agent_id}/repositories"),
                ("get", "/v1/agents/{agent_id}/mcp-servers"),
                ("get", "/v1/agents/{agent_id}/mcp-servers/{mcp_server_id}/tools"),
                ("post", "/v1/agents/{agent_id}/mcp-servers/tools/search"),
                ("post", "/v1/agents/{agent_id}/mcp-servers/{mcp_server_id}/tools/{tool_id}/run"),
                ("get", "/v1/metadata/balance"),
                ("get", "/v1/organizations/self/quotas"),
                ("post", "/v1/groups/{group_id}/messages"),
                ("post", "/v1/groups/{group_id}/messages/stream"),
                ("get", "/v1/agents/{agent_id}/memory/commits"),
                ("get", "/v1/agents/{agent_id}/memory/commits/{sha}"),
                ("get", "/v1/agents/{agent_id}/memory/diff"),
                ("post", "/v1/agents/{agent_id}/memory/revert"),
                # scheduled messages, as letta-client 1.12.1's agents.schedule calls them
                ("post", "/v1/agents/{agent_id}/schedule"),
                ("get", "/v1/agents/{agent_id}/schedule"),
                ("get", "/v1/agents/{agent_id}/schedule/{scheduled_message_id}"),
                ("delete", "/v1/agents/{agent_id}/schedule/{scheduled_message_id}"),
                # client-side access tokens, as letta-client 1.12.1's access_tokens calls them
                ("post", "/v1/client-side-access-tokens"),
                ("get", "/v1/client-side-access-tokens"),
                ("delete", "/v1/client-side-access-tokens/{token}"),
                # API keys and the audit log (docs/guides/access.md)
                ("post", "/v1/api-keys"), ("get", "/v1/api-keys"),
                ("get", "/v1/api-keys/{key_id}"), ("patch", "/v1/api-keys/{key_id}"),
                ("delete", "/v1/api-keys/{key_id}"), ("get", "/v1/audit"),
                ("get", "/v1/usage")}
# Parameters beyond Letta's document that Letta's cloud API takes and Letta Code sends.
BEYOND_LETTA_PARAMETERS = {("get", "/v1/providers", "provider_category", "query")}


def test_served_operations_are_lettas_with_its_parameter_names(server: Server) -> None:
    """Every operation served is one of Letta's document, at its path (less the trailing
    slash) with the method it has there, and takes no parameter Letta's does not name."""
    served = httpx.get(f"{server.url}/openapi.json", timeout=SCHEMA).json()["paths"]
    problems = []
    for path, item in served.items():
        for method, operation in item.items():
            if (method, path) in BEYOND_LETTA:
                continue
            try:
                letta = letta_operation(path, method)
            except KeyError:
                problems.append(f"{method.upper()} {path}: not in Letta's document")
                continue
            ours = {(p["name"], p["in"]) for p in operation.get("parameters", [])
                    if (method, path, p["name"], p["in"]) not in BEYOND_LETTA_PARAMETERS}
            theirs = {(p["name"], p["in"]) for p in letta.get("parameters", [])}
            if ours - theirs:
                problems.append(f"{method.upper()} {path}: {sorted(ours - theirs)}")
    assert not problems, problems
