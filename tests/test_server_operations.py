"""The operations of Letta 0.16.8's document that stateloop serves: the README's count of
them measured from the server's own ``/openapi.json``, and the last ones added (``/v1/jobs``,
``embeddings/total_storage_size``, MCP's OAuth callback) answering as Letta's do."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from letta_client import Letta

from fake_script import Script
from letta_spec import assert_letta_shape, letta_spec
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, client, fake, new_agent, script, server, settings_for  # noqa: F401 (fixtures)

README = Path(__file__).resolve().parents[1] / "README.md"
SENTENCE = re.compile(r"Served: (\d+) of the (\d+) public operations in Letta 0\.16\.8's "
                      r"document")
METHODS = ("get", "post", "put", "patch", "delete")


def operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    """(path, method) of each operation; a path's parameter names and a trailing slash do
    not tell operations apart (Letta writes ``/v1/tools/``, stateloop ``/v1/tools``)."""
    return {(re.sub(r"\{[^}]+\}", "{}", path.rstrip("/")), method)
            for path, item in document["paths"].items() for method in item if method in METHODS}


def test_the_readme_says_how_many_of_letta_s_operations_are_served(server: Server) -> None:
    letta = {op for op in operations(letta_spec()) if not op[0].startswith("/v1/_internal")}
    ours = operations(httpx.get(f"{server.url}/openapi.json", timeout=30).json())
    served = letta & ours
    found = SENTENCE.findall(README.read_text())
    assert len(found) == 1, "README.md must say once: 'Served: N of the M public operations "
    assert (int(found[0][0]), int(found[0][1])) == (len(served), len(letta)), (
        f"README.md says {found[0][0]} of {found[0][1]}; the server serves {len(served)} of "
        f"{len(letta)}; not served: {sorted(letta - ours)}")
    for added in (("/v1/jobs", "get"), ("/v1/jobs/active", "get"), ("/v1/jobs/{}", "get"),
                  ("/v1/jobs/{}/cancel", "patch"), ("/v1/jobs/{}", "delete"),
                  ("/v1/embeddings/total_storage_size", "get"),
                  ("/v1/tools/mcp/oauth/callback", "get")):
        assert added in served


def test_the_job_lists_are_empty_and_an_unknown_job_id_is_not_found(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for path in ("/v1/jobs", "/v1/jobs/", "/v1/jobs/active", "/v1/jobs?active=true"):
            listed = http.get(path, follow_redirects=True)
            assert listed.status_code == 200 and listed.json() == []
        assert_letta_shape("/v1/jobs/", "get", [])
        job = "job-00000000-0000-4000-8000-000000000000"
        for method, path in (("GET", f"/v1/jobs/{job}"), ("PATCH", f"/v1/jobs/{job}/cancel"),
                             ("DELETE", f"/v1/jobs/{job}")):
            answer = http.request(method, path)
            assert answer.status_code == 404 and "not found" in answer.json()["detail"]


def test_total_storage_size_counts_the_archival_embeddings(client: Letta, server: Server,
                                                           script: Script) -> None:
    def size(unit: str | None = None) -> httpx.Response:
        headers = {"storage_unit": unit} if unit is not None else {}
        return httpx.get(f"{server.url}/v1/embeddings/total_storage_size", headers=headers,
                         timeout=30)

    before = size("B").json()
    agent = new_agent(client)
    made = [*client.agents.passages.create(agent.id, text="Ada likes tea."),
            *client.agents.passages.create(agent.id, text="Ada lives in London.")]
    after = size("B").json()
    dimensions = {len(p.embedding or []) for p in made}
    assert len(dimensions) == 1 and dimensions != {0}
    assert after - before == 2 * dimensions.pop() * 4  # two float32 vectors
    assert size().json() == after / 1024**3 == size("GB").json()
    assert size("KB").json() == after / 1024
    refused = size("PB")
    assert refused.status_code == 422 and "storage_unit" in refused.text


def test_the_mcp_oauth_callback_knows_no_state(server: Server) -> None:
    url = f"{server.url}/v1/tools/mcp/oauth/callback"
    assert httpx.get(url, timeout=30).json() == {"status": "error",
                                                 "message": "Missing state parameter"}
    answer = httpx.get(url, params={"code": "abc", "state": "xyz"}, timeout=30).json()
    assert answer == {"status": "error", "message": "Invalid or expired state parameter"}


JOB = "job-00000000-0000-4000-8000-000000000000"
PROVIDER = "provider-00000000-0000-4000-8000-000000000000"
RUN = "run-00000000-0000-4000-8000-000000000000"
STEP = "step-00000000-0000-4000-8000-000000000000"
AGENT = "agent-00000000-0000-4000-8000-000000000000"
SCHEDULED = "scheduled-00000000-0000-4000-8000-000000000000"
NEW_ROUTES = [("GET", "/v1/jobs"), ("GET", "/v1/jobs/active"), ("GET", f"/v1/jobs/{JOB}"),
              ("PATCH", f"/v1/jobs/{JOB}/cancel"), ("DELETE", f"/v1/jobs/{JOB}"),
              ("GET", "/v1/embeddings/total_storage_size"),
              ("GET", "/v1/tools/mcp/oauth/callback"),
              ("GET", "/v1/providers"), ("POST", "/v1/providers"), ("POST", "/v1/providers/check"),
              ("GET", f"/v1/providers/{PROVIDER}"), ("PATCH", f"/v1/providers/{PROVIDER}"),
              ("DELETE", f"/v1/providers/{PROVIDER}"), ("POST", f"/v1/providers/{PROVIDER}/check"),
              ("PATCH", f"/v1/providers/{PROVIDER}/refresh"),
              ("GET", f"/v1/runs/{RUN}/trace"), ("GET", f"/v1/steps/{STEP}/trace"),
              ("GET", f"/v1/telemetry/{STEP}"),
              ("POST", "/v1/chat/completions"),
              ("POST", f"/v1/voice-beta/{AGENT}/chat/completions"),
              ("POST", f"/v1/agents/{AGENT}/schedule"), ("GET", f"/v1/agents/{AGENT}/schedule"),
              ("GET", f"/v1/agents/{AGENT}/schedule/{SCHEDULED}"),
              ("DELETE", f"/v1/agents/{AGENT}/schedule/{SCHEDULED}"),
              ("POST", "/v1/messages/batches"), ("GET", "/v1/messages/batches"),
              ("GET", f"/v1/messages/batches/{JOB}"),
              ("GET", f"/v1/messages/batches/{JOB}/messages"),
              ("PATCH", f"/v1/messages/batches/{JOB}/cancel"),
              ("GET", "/v1/api-keys"), ("POST", "/v1/api-keys"),
              ("GET", "/v1/api-keys/0123456789abcdef01234567"),
              ("PATCH", "/v1/api-keys/0123456789abcdef01234567"),
              ("POST", "/v1/client-side-access-tokens"),
              ("DELETE", "/v1/api-keys/0123456789abcdef01234567"),
              ("GET", "/v1/client-side-access-tokens"),
              ("DELETE", "/v1/client-side-access-tokens/ck-sl-0123456789abcdef01234567"),
              ("GET", "/v1/audit"), ("GET", "/v1/usage")]


@pytest.fixture(scope="module")
def guarded(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("guarded") / "stateloop.db"
    with Server(settings_for(fake, db, server_password="s3cret")) as running:
        yield running


@pytest.mark.parametrize(("method", "path"), NEW_ROUTES)
def test_the_new_routes_need_the_password_and_refuse_other_sites(guarded: Server, method: str,
                                                                 path: str) -> None:
    """Every caller needs a credential (the password is an admin's; what narrower ones may
    do: test_server_access.py), and a write from another site's page is refused before it
    reaches the route (a rebound name is refused for every route alike:
    test_server_browsers.py)."""
    url = guarded.url + path
    refused = httpx.request(method, url, timeout=30)
    assert refused.status_code == 401 and "Authorization: Bearer" in refused.text
    key = {"Authorization": "Bearer s3cret"}
    answered = httpx.request(method, url, headers=key, timeout=30)
    # With the password the route itself answers: found, not found, or (a write sent with
    # no body) the body it needs named.
    bodiless = (200, 404) if method in ("GET", "DELETE") else (200, 404, 422)
    assert answered.status_code in bodiless, answered.text
    if method != "GET":
        cross = httpx.request(method, url, timeout=30,
                              headers={**key, "Origin": "https://evil.example"})
        assert cross.status_code == 403, cross.text
