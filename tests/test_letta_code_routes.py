"""The routes Letta Code reads besides Letta's own (an agent's secrets, repositories and MCP
servers, the providers, the balance) and the versions ``/v1/health`` reports: their shapes,
their auth like every other route's, and no key of the operator's in any answer."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from letta_spec import assert_letta_shape
from mcp_support import demo_command
from patience import ANSWERS
from stateloop import __version__
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, fake, script, settings_for  # noqa: F401 (fixtures)

TOKEN = "op-s3cret-token"
MODEL_KEY = "sk-operator-model-key"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> str:
    return demo_command(tmp_path_factory.mktemp("mcp"))


@pytest.fixture(scope="module")
def secured(fake: FakeOpenAI, demo: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("routes") / "stateloop.db"
    settings = settings_for(fake, db, server_password=TOKEN, model_api_key=MODEL_KEY,
                            mcp_stdio_commands=[demo])
    with Server(settings) as running:
        yield running


@pytest.fixture(scope="module")
def http(secured: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=secured.url, timeout=ANSWERS,
                      headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield client


@pytest.fixture(scope="module")
def agent_id(http: httpx.Client) -> str:
    created = http.post("/v1/agents/", json={
        "model": "openai/gpt-4o-mini", "include_base_tools": False,
        "secrets": {"DEPLOY_KEY": "agent-value"}})
    assert created.status_code == 200, created.text
    return str(created.json()["id"])


def test_health_reports_lettas_api_version_and_stateloops_beside_it(secured: Server) -> None:
    body = httpx.get(f"{secured.url}/v1/health/", timeout=ANSWERS).json()  # no token needed
    assert body == {"status": "ok", "version": "0.16.8", "stateloop_version": __version__}
    assert_letta_shape("/v1/health/", "get", body)


def test_new_routes_need_the_token_like_every_other(secured: Server, agent_id: str) -> None:
    paths = [f"/v1/agents/{agent_id}/secrets", f"/v1/agents/{agent_id}/repositories",
             f"/v1/agents/{agent_id}/mcp-servers", "/v1/providers", "/v1/metadata/balance",
             "/v1/organizations/self/quotas",
             f"/v1/agents/{agent_id}/mcp-servers/any/tools"]
    for path in paths:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            answer = httpx.get(f"{secured.url}{path}", headers=headers, timeout=ANSWERS)
            assert answer.status_code == 401, (path, headers, answer.text)
            assert "agent-value" not in answer.text
    for path in (f"/v1/agents/{agent_id}/mcp-servers/any/tools/x/run",
                 f"/v1/agents/{agent_id}/mcp-servers/tools/search"):
        refused = httpx.post(f"{secured.url}{path}", json={"args": {}, "query": "add"},
                             timeout=ANSWERS)
        assert refused.status_code == 401, path


def test_an_agents_secrets_are_its_own_variables(http: httpx.Client, agent_id: str) -> None:
    listed = http.get(f"/v1/agents/{agent_id}/secrets").json()
    assert [(v["key"], v["value"], v["agent_id"]) for v in listed] == [
        ("DEPLOY_KEY", "agent-value", agent_id)]
    included = http.get(f"/v1/agents/{agent_id}", params={"include": "agent.secrets"}).json()
    assert included["secrets"] == listed  # what the agent's state shows, nothing more
    assert http.patch(f"/v1/agents/{agent_id}", json={"secrets": {"B": "2"}}).status_code == 200
    assert [v["key"] for v in http.get(f"/v1/agents/{agent_id}/secrets").json()] == ["B"]
    other = http.post("/v1/agents/", json={"model": "openai/gpt-4o-mini",
                                           "include_base_tools": False}).json()
    assert http.get(f"/v1/agents/{other['id']}/secrets").json() == []


def test_unknown_agents_are_404_naming_them(http: httpx.Client) -> None:
    for tail in ("secrets", "repositories", "mcp-servers", "mcp-servers/x/tools"):
        answer = http.get(f"/v1/agents/agent-missing/{tail}")
        assert answer.status_code == 404 and "agent-missing" in answer.text, (tail, answer.text)


def test_repositories_are_none_besides_memory(http: httpx.Client, agent_id: str) -> None:
    assert http.get(f"/v1/agents/{agent_id}/repositories").json() == {"repositories": []}


def test_providers_are_listed_without_keys_or_endpoints(http: httpx.Client,
                                                         fake: FakeOpenAI) -> None:
    answer = http.get("/v1/providers")
    listed = answer.json()
    assert [(p["name"], p["provider_type"], p["provider_category"]) for p in listed] == [
        ("openai", "openai", "base")]
    assert_letta_shape("/v1/providers/", "get", listed)
    for secret in (MODEL_KEY, TOKEN, fake.base_url, "127.0.0.1"):
        assert secret not in answer.text
    assert http.get("/v1/providers", params={"name": "anthropic"}).json() == []
    again = http.get("/v1/providers").json()
    assert [p["id"] for p in again] == [p["id"] for p in listed]  # stable ids
    assert http.get("/v1/providers", params={"limit": 0}).status_code == 422


def test_quota_is_unlimited_with_no_window(http: httpx.Client) -> None:
    assert http.get("/v1/organizations/self/quotas").json() == {
        "lettaTier": {"bucket": "unlimited", "dailyBucket": None},
        "quotaWindowEnd": None, "dailyQuotaWindowEnd": None}


def test_balance_is_none_on_a_self_hosted_tier(http: httpx.Client) -> None:
    assert http.get("/v1/metadata/balance").json() == {
        "billing_tier": "self-hosted", "total_balance": 0, "monthly_credit_balance": 0,
        "purchased_credit_balance": 0}


def test_an_agents_mcp_servers_are_the_registry_with_secrets_hidden(
        http: httpx.Client, agent_id: str, demo: str) -> None:
    created = http.post("/v1/mcp-servers", json={"server_name": "demo", "config": {
        "mcp_server_type": "stdio", "command": demo, "args": [],
        "env": {"DEMO_SECRET": "mcp-s3cret"}}})
    assert created.status_code == 200, created.text
    server_id = created.json()["id"]
    answer = http.get(f"/v1/agents/{agent_id}/mcp-servers")
    assert [(s["id"], s["server_name"], s["mcp_server_type"]) for s in answer.json()] == [
        (server_id, "demo", "stdio")]
    assert "mcp-s3cret" not in answer.text
    assert answer.json()[0]["env"] == {"DEMO_SECRET": "****"}
    tools = http.get(f"/v1/agents/{agent_id}/mcp-servers/{server_id}/tools").json()
    assert "add" in {tool["name"] for tool in tools}
    ran = http.post(f"/v1/agents/{agent_id}/mcp-servers/{server_id}/tools/add/run",
                    json={"args": {"a": 2, "b": 3}})
    assert (ran.json()["status"], ran.json()["func_return"]) == ("success", "5"), ran.text
    found = http.post(f"/v1/agents/{agent_id}/mcp-servers/tools/search",
                      json={"query": "add two", "search_mode": "vector", "limit": 2}).json()
    assert found[0]["tool"]["name"] == "add" and len(found) <= 2
    assert {hit["tool"]["tool_type"] for hit in found} == {"external_mcp"}
    missing = http.get(f"/v1/agents/{agent_id}/mcp-servers/mcp_server-missing/tools")
    assert missing.status_code == 404
