"""Identities over REST: ``/v1/identities`` (Letta's deprecated routes, which letta-client 1.12
no longer wraps: plain HTTP), identities on agents and blocks through letta-client, the
agents and blocks filters, and one end user's block shared by two agents."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.testing import call, reply
from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)


@pytest.fixture
def http(server: Server) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def prop(key: str, value: object, kind: str = "string") -> dict[str, object]:
    return {"key": key, "value": value, "type": kind}


def test_create_upsert_list_modify_delete(http: httpx.Client) -> None:
    ada = ok(http.post("/v1/identities/", json={
        "identifier_key": "rest-ada", "name": "Ada", "identity_type": "user",
        "properties": [prop("plan", "pro")]}))
    assert ada["id"].startswith("identity-") and ada["agent_ids"] == []
    assert ok(http.get(f"/v1/identities/{ada['id']}")) == ada
    with_org = ok(http.post("/v1/identities", json={
        "identifier_key": "rest-acme", "name": "ACME", "identity_type": "org"}))
    duplicate = http.post("/v1/identities/", json={
        "identifier_key": "rest-ada", "name": "Other", "identity_type": "user"})
    assert duplicate.status_code == 409 and "rest-ada" in duplicate.json()["detail"]
    bad = http.post("/v1/identities/", json={
        "identifier_key": "rest-bad", "name": "Bad", "identity_type": "robot"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][:2] == [
        "body", "identity_type"]

    again = ok(http.put("/v1/identities/", json={
        "identifier_key": "rest-ada", "name": "Ada L.", "identity_type": "user",
        "properties": [prop("plan", "free")]}))
    assert again["id"] == ada["id"] and again["properties"] == [prop("plan", "free")]
    found = ok(http.get("/v1/identities/", params={"identifier_key": "rest-ada"}))
    assert [x["name"] for x in found] == ["Ada L."]
    orgs = ok(http.get("/v1/identities/", params={"identity_type": "org", "order": "asc"}))
    assert with_org["id"] in [x["id"] for x in orgs] and ada["id"] not in [
        x["id"] for x in orgs]
    before = ok(http.get("/v1/identities/count"))

    changed = ok(http.patch(f"/v1/identities/{ada['id']}", json={
        "name": "Ada King", "properties": [prop("vip", True, "boolean")]}))
    assert changed["name"] == "Ada King"
    assert changed["properties"] == [prop("plan", "free"), prop("vip", True, "boolean")]
    replaced = ok(http.put(f"/v1/identities/{ada['id']}/properties",
                           json=[prop("age", 36, "number")]))
    assert replaced["properties"] == [prop("age", 36, "number")]
    assert http.patch(f"/v1/identities/{ada['id']}", json={
        "identifier_key": "rest-acme"}).status_code == 409

    assert http.delete(f"/v1/identities/{ada['id']}").status_code == 200
    assert ok(http.get("/v1/identities/count")) == before - 1
    for response in (http.get(f"/v1/identities/{ada['id']}"),
                     http.delete(f"/v1/identities/{ada['id']}"),
                     http.patch(f"/v1/identities/{ada['id']}", json={"name": "x"}),
                     http.get(f"/v1/identities/{ada['id']}/agents")):
        assert response.status_code == 404, response.text


def test_unknown_ids_are_404_and_store_nothing(http: httpx.Client, client: Letta) -> None:
    missing = "agent-00000000-0000-4000-8000-000000000000"
    response = http.post("/v1/identities/", json={
        "identifier_key": "rest-ghost", "name": "Ghost", "identity_type": "user",
        "agent_ids": [missing]})
    assert response.status_code == 404 and missing in response.json()["detail"]
    assert ok(http.get("/v1/identities/", params={"identifier_key": "rest-ghost"})) == []
    nobody = "identity-00000000-0000-4000-8000-000000000000"
    with pytest.raises(letta_client.NotFoundError, match=nobody):
        new_agent(client, name="rest-ghost-agent", identity_ids=[nobody])
    assert client.agents.list(name="rest-ghost-agent").items == []
    agent = new_agent(client)
    with pytest.raises(letta_client.NotFoundError, match=nobody):
        client.agents.identities.attach(nobody, agent_id=agent.id)
    with pytest.raises(letta_client.NotFoundError, match=nobody):
        client.agents.update(agent.id, identity_ids=[nobody], name="renamed")
    assert client.agents.retrieve(agent.id).name == agent.name


def test_an_identity_on_two_agents_and_a_block(http: httpx.Client, client: Letta,
                                               script: Script) -> None:
    user = ok(http.post("/v1/identities/", json={
        "identifier_key": "rest-grace", "name": "Grace", "identity_type": "user"}))
    other = ok(http.post("/v1/identities/", json={
        "identifier_key": "rest-other", "name": "Other", "identity_type": "user"}))
    block = client.blocks.create(label="user_profile", value="Grace drinks tea")
    shown = ok(http.patch(f"/v1/blocks/{block.id}/identities/attach/{user['id']}"))
    assert shown["id"] == block.id
    writer = new_agent(client, identity_ids=[user["id"]], block_ids=[block.id],
                       tools=["memory_replace"])
    reader = new_agent(client, block_ids=[block.id])
    client.agents.identities.attach(user["id"], agent_id=reader.id)
    client.agents.identities.attach(user["id"], agent_id=reader.id)  # twice: one link
    loner = new_agent(client, identity_ids=[other["id"]])

    state = client.agents.retrieve(writer.id, include=["agent.identities"])
    assert state.identity_ids == [user["id"]]
    assert [(x.id, x.identifier_key) for x in state.identities] == [(user["id"], "rest-grace")]
    assert ok(http.get(f"/v1/identities/{user['id']}"))["agent_ids"] == [writer.id, reader.id]
    by_id = client.agents.list(identity_id=user["id"], order="asc").items
    assert [a.id for a in by_id] == [writer.id, reader.id]
    by_key = client.agents.list(identifier_keys=["rest-grace", "rest-other"]).items
    assert {a.id for a in by_key} == {writer.id, reader.id, loner.id}
    assert ok(http.get("/v1/agents/count", params={"identity_id": user["id"]})) == 2
    listed = ok(http.get(f"/v1/identities/{user['id']}/agents", params={"order": "asc"}))
    assert [a["id"] for a in listed] == [writer.id, reader.id]
    assert [b.id for b in client.blocks.list(identity_id=user["id"]).items] == [block.id]
    assert client.blocks.list(identifier_keys=["rest-other"]).items == []
    assert [b["id"] for b in ok(http.get(f"/v1/identities/{user['id']}/blocks"))] == [
        block.id]

    # The end user's block is one block: the writer's edit is in the reader's next request.
    script.set(call("memory_replace", label="user_profile", old_string="tea",
                    new_string="coffee"), reply("Noted."), reply("Coffee."))
    client.agents.messages.create(writer.id, input="I drink coffee now")
    client.agents.messages.create(reader.id, input="What do I drink?")
    assert "Grace drinks coffee" in script.requests[-1].messages[0].text

    client.agents.identities.detach(user["id"], agent_id=reader.id)
    assert [a.id for a in client.agents.list(identity_id=user["id"]).items] == [writer.id]
    client.agents.update(writer.id, identity_ids=[])
    assert client.agents.retrieve(writer.id, include=["agent.identities"]).identities == []
    ok(http.patch(f"/v1/blocks/{block.id}/identities/detach/{user['id']}"))
    assert ok(http.get(f"/v1/identities/{user['id']}/blocks")) == []
    assert http.patch(f"/v1/blocks/{block.id}/identities/attach/"
                      "identity-00000000-0000-4000-8000-000000000000").status_code == 404
