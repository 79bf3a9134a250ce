"""Memory history over REST: an edit through the API is a commit by the API caller, listed
in Letta's ``MemoryCommit`` shape; files at a commit, a diff, and a revert that is a commit
and reaches the agent's next model request."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import httpx
from letta_client import Letta

from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)


def test_api_edits_are_commits_and_a_revert_reaches_the_next_request(
        client: Letta, server: Server, fake: FakeOpenAI) -> None:
    agent = new_agent(client)
    client.agents.blocks.update("human", agent_id=agent.id, value="Name: Bob")
    http = httpx.Client(base_url=server.url, timeout=30)
    commits = http.get(f"/v1/agents/{agent.id}/memory/commits").json()
    assert [c["message"] for c in commits] == ["Update human", "Create agent"]
    edit = commits[0]
    assert (edit["author_type"], edit["author_id"], edit["author_name"]) == (
        "user", "api", "REST API")
    assert edit["id"] == f"memcommit-{edit['sha']}" and edit["files_changed"] == ["human.md"]
    assert (edit["additions"], edit["deletions"]) == (1, 1)
    assert edit["parent_sha"] == commits[1]["sha"]

    first = commits[1]["sha"]
    at = http.get(f"/v1/agents/{agent.id}/memory/commits/{first[:10]}",
                  params={"label": "human"}).json()
    assert at["sha"] == first
    assert at["files"] == [{"path": "human.md", "label": "human", "value": "Name: Ada",
                            "content": "---\ndescription: null\n---\nName: Ada"}]
    diff = http.get(f"/v1/agents/{agent.id}/memory/diff", params={"from": first}).json()
    assert diff["to_sha"] == edit["sha"] and "-Name: Ada" in diff["diff"]
    assert "+Name: Bob" in diff["diff"]

    reverted = http.post(f"/v1/agents/{agent.id}/memory/revert",
                         json={"commit": first}).json()["commit"]
    assert reverted["message"] == f"Revert to {first[:12]}"
    assert reverted["parent_sha"] == edit["sha"]
    assert client.agents.blocks.retrieve("human", agent_id=agent.id).value == "Name: Ada"
    client.agents.messages.create(agent_id=agent.id,
                                  messages=[{"role": "user", "content": "who am I?"}])
    system = str(fake.requests[-1].body["messages"][0]["content"])
    assert "Name: Ada" in system and "Name: Bob" not in system
    again = http.post(f"/v1/agents/{agent.id}/memory/revert", json={"commit": first})
    assert again.json() == {"commit": None}

    history = http.get(f"/v1/agents/{agent.id}/memory/commits",
                       params={"label": "human", "limit": 2}).json()
    assert [c["message"] for c in history] == [f"Revert to {first[:12]}", "Update human"]
    older = http.get(f"/v1/agents/{agent.id}/memory/commits",
                     params={"before": history[-1]["seq"]}).json()
    assert [c["message"] for c in older] == ["Create agent"]


def test_bad_requests_are_refused_naming_the_problem(client: Letta, server: Server) -> None:
    agent = new_agent(client)
    http = httpx.Client(base_url=server.url, timeout=30)
    missing = http.get("/v1/agents/agent-nope/memory/commits")
    assert missing.status_code == 404 and "agent-nope" in missing.json()["detail"]
    bad_sha = http.get(f"/v1/agents/{agent.id}/memory/commits/zz")
    assert bad_sha.status_code == 404 and "not a commit sha" in bad_sha.json()["detail"]
    unknown = http.post(f"/v1/agents/{agent.id}/memory/revert", json={"commit": "abcdef12"})
    assert unknown.status_code == 404 and "abcdef12" in unknown.json()["detail"]
    no_label = http.post(f"/v1/agents/{agent.id}/memory/revert",
                         json={"commit": "HEAD", "label": "ghost"})
    assert no_label.status_code == 404 and "ghost" in no_label.json()["detail"]
    too_many = http.get(f"/v1/agents/{agent.id}/memory/commits", params={"limit": 100_000})
    assert too_many.status_code == 422
    assert [c["message"] for c in http.get(
        f"/v1/agents/{agent.id}/memory/commits").json()] == ["Create agent"]


def test_a_page_cursor_beyond_64_bits_is_422(client: Letta, server: Server) -> None:
    agent = new_agent(client)
    answer = httpx.get(f"{server.url}/v1/agents/{agent.id}/memory/commits",
                       params={"before": str(2**70)}, timeout=30)
    assert answer.status_code == 422 and "before" in str(answer.json()["detail"])
