"""Every operation of Letta 0.16.8's OpenAPI document and of the server's own, sent with a
client-side access token: for another agent's resources the answer is 404 (or 401/403,
never data), for its own agent only what its policy grants gets past the guard; browsers of
the token's hostname alone get CORS; and the access guide's table is the code's."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from letta_spec import letta_spec
from stateloop.server.permissions import ACCESSES, table, token_access
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, fake, script, settings_for  # noqa: F401 (fixtures)

PASSWORD = "policy-password"
APP = "https://app.example"
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "access.md"
METHODS = ("get", "post", "put", "patch", "delete")
ID = "00000000-0000-4000-8000-000000000000"


@pytest.fixture(scope="module")
def served(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("policy") / "stateloop.db"
    with Server(settings_for(fake, db, server_password=PASSWORD)) as running:
        yield running


@pytest.fixture(scope="module")
def admin(served: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, timeout=30,
                      headers={"Authorization": f"Bearer {PASSWORD}"}) as http:
        yield http


def agent(admin: httpx.Client, name: str) -> str:
    made = admin.post("/v1/agents", json={"name": name, "model": "openai/gpt-4o-mini",
                                          "include_base_tools": False,
                                          "memory_blocks": [{"label": "human", "value": "?"}]})
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


def token(admin: httpx.Client, agent_id: str, access: list[str], **extra: Any) -> str:
    made = admin.post("/v1/client-side-access-tokens", json={
        "hostname": APP, "policy": [{"type": "agent", "id": agent_id, "access": access}],
        "expires_at": (datetime.now(UTC) + timedelta(minutes=10)).isoformat(), **extra})
    assert made.status_code == 200, made.text
    return str(made.json()["token"])


def operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path.rstrip("/") or "/")
            for path, item in document["paths"].items() for method in item
            if method in METHODS and not path.startswith("/v1/_internal")}


def filled(path: str, agent_id: str) -> str:
    return re.sub(r"\{([^}]+)\}",
                  lambda m: agent_id if m.group(1) == "agent_id" else f"x-{ID}", path)


def test_a_token_reaches_nothing_of_another_agent(served: Server, admin: httpx.Client) -> None:
    mine, other = agent(admin, "token-holder"), agent(admin, "someone-else")
    secret = token(admin, mine, list(ACCESSES))
    ours = admin.get("/openapi.json").json()
    every = operations(letta_spec()) | operations(ours)
    answers: dict[tuple[str, str], int] = {}
    with httpx.Client(base_url=served.url, timeout=30,
                      headers={"Authorization": f"Bearer {secret}"}) as http:
        for method, path in sorted(every):
            answer = http.request(method, filled(path, other), json={})
            answers[method, path] = answer.status_code
            assert answer.status_code in (401, 403, 404, 405), (method, path, answer.text)
        # the other agent is as unknown as an agent that never was
        unknown = http.get(f"/v1/agents/agent-{ID}/messages")
        known = http.get(f"/v1/agents/{other}/messages")
        assert (known.status_code, known.json()["detail"].replace(other, "X")) == (
            unknown.status_code, unknown.json()["detail"].replace(f"agent-{ID}", "X"))
    served_agent_routes = [op for op in operations(ours) if "{agent_id}" in op[1]]
    assert served_agent_routes and all(answers[op] == 404 for op in served_agent_routes)
    assert len(every) > 250
    assert admin.get(f"/v1/agents/{other}").status_code == 200  # nothing was changed


def test_on_its_own_agent_a_token_passes_only_what_its_policy_grants(
        served: Server, admin: httpx.Client) -> None:
    mine = agent(admin, "policy-holder")
    ours = operations(admin.get("/openapi.json").json())
    assert all(token_access(method, path) is None for method, path in ours
               if method == "DELETE")  # no token deletes anything
    for granted in (["read_messages"], ["write_messages"], ["read_agent"],
                    ["write_agent"], ["read_messages", "write_messages"]):
        secret = token(admin, mine, granted)
        with httpx.Client(base_url=served.url, timeout=30,
                          headers={"Authorization": f"Bearer {secret}"}) as http:
            for method, path in sorted(ours):
                needed = token_access(method, path)
                if needed in granted and method in ("POST", "PATCH") and (
                        "/messages" in path or path.endswith("{agent_id}")):
                    continue  # would run the agent or change it: the letta-client test does
                answer = http.request(method, filled(path, mine), json={})
                if needed in granted and "{agent_id}" in path:
                    assert answer.status_code not in (401, 403), (method, path, answer.text)
                else:
                    assert answer.status_code in (403, 404, 405), (method, path, answer.text)
                    if answer.status_code == 403:
                        assert "client-side access token" in answer.json()["detail"]


def test_only_pages_of_the_token_s_hostname_get_cors(served: Server,
                                                     admin: httpx.Client) -> None:
    mine = agent(admin, "cors-holder")
    secret = token(admin, mine, ["read_messages", "write_messages"])
    path = f"{served.url}/v1/agents/{mine}/messages"
    asked = {"Access-Control-Request-Method": "GET",
             "Access-Control-Request-Headers": "authorization"}
    allowed = httpx.options(path, headers={"Origin": APP, **asked}, timeout=30)
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-origin"] == APP
    assert "authorization" in allowed.headers["access-control-allow-headers"]
    other = httpx.options(path, headers={"Origin": "https://evil.example", **asked}, timeout=30)
    assert "access-control-allow-origin" not in other.headers
    read = httpx.get(path, headers={"Origin": APP, "Authorization": f"Bearer {secret}"},
                     timeout=30)
    assert read.status_code == 200 and read.headers["access-control-allow-origin"] == APP
    elsewhere = httpx.get(path, timeout=30, headers={"Origin": "https://evil.example",
                                                     "Authorization": f"Bearer {secret}"})
    assert elsewhere.status_code == 403 and APP in elsewhere.json()["detail"]
    assert "access-control-allow-origin" not in elsewhere.headers
    # a write from the token's page passes the cross-site check; the password's does not
    cancel = httpx.post(f"{path}/cancel", json={}, timeout=30,
                        headers={"Origin": APP, "Authorization": f"Bearer {secret}"})
    assert cancel.status_code == 200, cancel.text
    assert httpx.post(f"{path}/cancel", json={}, timeout=30, headers={
        "Origin": APP, "Authorization": f"Bearer {PASSWORD}"}).status_code == 403


def test_bad_token_requests_are_refused_naming_the_problem(admin: httpx.Client) -> None:
    mine = agent(admin, "bounds")
    entry = {"type": "agent", "id": mine, "access": ["read_messages"]}
    for body, named in (
            ({"hostname": "app.example", "policy": [entry]}, "hostname"),
            ({"hostname": "javascript:alert(1)", "policy": [entry]}, "hostname"),
            ({"hostname": APP, "policy": []}, "policy"),
            ({"hostname": APP, "policy": [entry] * 101}, "policy"),
            ({"hostname": APP, "policy": [{**entry, "access": ["delete_everything"]}]},
             "access"),
            ({"hostname": APP, "policy": [entry], "expires_at": "2001-01-01T00:00:00Z"},
             "expires_at"),
            ({"hostname": APP + "/" + "x" * 400, "policy": [entry]}, "hostname")):
        answer = admin.post("/v1/client-side-access-tokens", json=body)
        assert answer.status_code == 422 and named in answer.text, (body, answer.text)
    missing = admin.post("/v1/client-side-access-tokens", json={
        "hostname": APP, "policy": [{**entry, "id": f"agent-{ID}"}]})
    assert missing.status_code == 404
    for body in ({"name": ""}, {"name": "x", "role": "root"}, {"name": "x" * 201},
                 {"name": "x", "project": "../etc"}, {"name": "x", "secret": "mine"}):
        assert admin.post("/v1/api-keys", json=body).status_code == 422, body


def test_the_access_guide_lists_every_route_with_what_it_needs(admin: httpx.Client) -> None:
    routes = operations(admin.get("/openapi.json").json())
    rows = {(m, p, role, access or "-") for m, p, role, access in table(routes)}
    text = GUIDE.read_text()
    found = set(re.findall(r"^\| (GET|POST|PUT|PATCH|DELETE) \| `([^`]+)` \| (\w+) \| "
                           r"(\w+|-) \|$", text, re.MULTILINE))
    assert found == rows, (f"missing from the guide: {sorted(rows - found)}; "
                           f"in the guide, not the server: {sorted(found - rows)}")
