"""Groups over HTTP: ``/v1/groups`` through letta-client's own HTTP stack (1.12.1 has no
groups resource; its ``get``/``post``/``patch``/``delete`` carry auth and errors), answers
checked against Letta's document, and a round-robin group run on the fake provider."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from letta_spec import assert_letta_shape
from stateloop.testing import call, error, reply
from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)


def get(client: Letta, path: str) -> Any:
    return client.get(path, cast_to=object)


def post(client: Letta, path: str, body: dict[str, Any]) -> Any:
    return client.post(path, body=body, cast_to=object)


def patch(client: Letta, path: str, body: dict[str, Any] | None = None) -> Any:
    return client.patch(path, body=body or {}, cast_to=object)


def test_groups_are_created_listed_modified_and_deleted(client: Letta) -> None:
    ann, bob = new_agent(client, name="ann"), new_agent(client, name="bob")
    group = post(client, "/v1/groups", {
        "agent_ids": [ann.id, bob.id], "description": "pair",
        "manager_config": {"manager_type": "round_robin", "max_turns": 3}})
    assert_letta_shape("/v1/groups/", "post", group)
    assert (group["manager_type"], group["agent_ids"], group["max_turns"]) == (
        "round_robin", [ann.id, bob.id], 3)

    assert group["id"] in [g["id"] for g in get(client, "/v1/groups")]
    assert get(client, "/v1/groups/count") >= 1
    assert get(client, f"/v1/groups/{group['id']}") == group
    mine = get(client, f"/v1/agents/{ann.id}/groups")
    assert_letta_shape("/v1/agents/{agent_id}/groups", "get", mine)
    assert [g["id"] for g in mine] == [group["id"]]

    changed = patch(client, f"/v1/groups/{group['id']}", {
        "description": "trio", "agent_ids": [bob.id, ann.id],
        "manager_config": {"manager_type": "dynamic", "manager_agent_id":
                           new_agent(client, name="boss").id, "max_turns": 2}})
    assert_letta_shape("/v1/groups/{group_id}", "patch", changed)
    assert (changed["description"], changed["agent_ids"], changed["manager_type"],
            changed["termination_token"]) == ("trio", [bob.id, ann.id], "dynamic", "DONE!")

    client.delete(f"/v1/groups/{group['id']}", cast_to=object)
    with pytest.raises(letta_client.NotFoundError):
        get(client, f"/v1/groups/{group['id']}")
    assert client.agents.retrieve(ann.id).name == "ann"  # its agents stay


def test_deleting_an_agent_removes_it_from_its_groups(client: Letta) -> None:
    ann, bob = new_agent(client), new_agent(client)
    group = post(client, "/v1/groups", {"agent_ids": [ann.id, bob.id], "description": ""})
    client.agents.delete(ann.id)
    assert get(client, f"/v1/groups/{group['id']}")["agent_ids"] == [bob.id]


def test_bad_groups_are_refused_naming_the_problem(server: Server, client: Letta) -> None:
    ann = new_agent(client)
    unknown = "agent-00000000-0000-4000-8000-000000000000"
    response = httpx.post(f"{server.url}/v1/groups",
                          json={"agent_ids": [ann.id, unknown], "description": ""})
    assert response.status_code == 404 and unknown in response.json()["detail"]
    response = httpx.post(f"{server.url}/v1/groups", json={
        "agent_ids": [ann.id], "description": "", "manager_config": {
            "manager_type": "supervisor"}})
    assert response.status_code == 422 and "manager_agent_id" in response.text
    response = httpx.post(f"{server.url}/v1/groups", json={
        "agent_ids": [ann.id], "description": "", "manager_config": {
            "manager_type": "supervisor", "manager_agent_id": ann.id}})
    assert response.status_code == 422 and "cannot also be a member" in response.text
    before = get(client, "/v1/groups/count")
    response = httpx.post(f"{server.url}/v1/groups", json={
        "agent_ids": [ann.id], "description": "", "manager_config": {
            "manager_type": "round_robin", "max_turns": 0}})
    assert response.status_code == 422 and "max_turns" in response.text
    response = httpx.post(f"{server.url}/v1/groups", json={
        "agent_ids": [ann.id], "description": "", "shared_block_ids": [""]})
    assert response.status_code == 404 and "no block" in response.text
    assert get(client, "/v1/groups/count") == before  # nothing half-stored


def test_a_round_robin_group_answers_and_keeps_its_conversation(client: Letta,
                                                                script: Any) -> None:
    ann, bob = new_agent(client, name="ann"), new_agent(client, name="bob")
    group = post(client, "/v1/groups", {"agent_ids": [ann.id, bob.id], "description": "duo"})
    script.set(reply("Ann here."), reply("Bob here."))

    answer = post(client, f"/v1/groups/{group['id']}/messages",
                  {"messages": [{"role": "user", "content": "Who is there?"}]})

    said = [(m["sender_id"], m["content"]) for m in answer["messages"]
            if m["message_type"] == "assistant_message"]
    assert said == [(ann.id, "Ann here."), (bob.id, "Bob here.")]
    assert answer["stop_reason"]["stop_reason"] == "end_turn"
    assert len(answer["usage"]["run_ids"]) == 2
    # bob was told what ann said
    assert "ann: Ann here." in [m.text for m in script.requests[1].messages]

    url = f"/v1/groups/{group['id']}/messages"
    history = client.get(url, cast_to=object, options={"params": {"order": "asc"}})
    assert_letta_shape("/v1/groups/{group_id}/messages", "get", history)
    assert [(m["message_type"], m["name"], m["content"]) for m in history] == [
        ("user_message", None, "Who is there?"), ("assistant_message", "ann", "Ann here."),
        ("assistant_message", "bob", "Bob here.")]

    edited = patch(client, f"{url}/{history[1]['id']}",
                   {"message_type": "assistant_message", "content": "Ann, here!"})
    assert edited["content"] == "Ann, here!"
    assert get(client, url)[1]["content"] == "Ann, here!"

    patch(client, f"/v1/groups/{group['id']}/reset-messages")
    assert get(client, url) == []
    assert client.agents.messages.list(ann.id).items  # the members keep their own


def test_a_group_stream_tags_every_frame_with_its_agent(server: Server, client: Letta,
                                                        script: Any) -> None:
    ann, bob = new_agent(client, name="ann"), new_agent(client, name="bob")
    group = post(client, "/v1/groups", {"agent_ids": [ann.id, bob.id], "description": ""})
    script.set(reply("one"), reply("two"))
    with httpx.stream("POST", f"{server.url}/v1/groups/{group['id']}/messages/stream",
                      json={"messages": [{"role": "user", "content": "count"}]},
                      timeout=30) as response:
        lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    frames = [json.loads(line) for line in lines[:-1]]
    said = [(f["sender_id"], f["content"]) for f in frames
            if f["message_type"] == "assistant_message"]
    assert said == [(ann.id, "one"), (bob.id, "two")]
    assert [f["message_type"] for f in frames[-2:]] == ["stop_reason", "usage_statistics"]


def test_a_supervisor_group_routes_through_its_manager(client: Letta, script: Any) -> None:
    boss = new_agent(client, name="boss")
    ann = new_agent(client, name="ann")
    group = post(client, "/v1/groups", {
        "agent_ids": [ann.id], "description": "",
        "manager_config": {"manager_type": "supervisor", "manager_agent_id": boss.id}})
    script.set(call("send_message_to_all_agents_in_group", message="Status?"),
               reply("All green."), reply("Ann reports all green."))

    answer = post(client, f"/v1/groups/{group['id']}/messages", {"input": "Status report"})

    said = [(m["name"], m["content"]) for m in answer["messages"]
            if m["message_type"] == "assistant_message"]
    assert said == [("ann", "All green."), ("boss", "Ann reports all green.")]
    assert [m["name"] for m in get(client, f"/v1/groups/{group['id']}/messages")] == [
        None, "boss", "ann", "boss"]


def test_shared_blocks_are_attached_to_every_member(client: Letta) -> None:
    ann, bob = new_agent(client), new_agent(client)
    team = client.blocks.create(label="team", value="Ship Friday.")
    group = post(client, "/v1/groups", {"agent_ids": [ann.id], "description": "",
                                        "shared_block_ids": [team.id]})
    assert group["shared_block_ids"] == [team.id]
    patch(client, f"/v1/groups/{group['id']}", {"agent_ids": [ann.id, bob.id]})
    for agent in (ann, bob):
        assert team.id in [b.id for b in client.agents.blocks.list(agent.id)]

    patch(client, f"/v1/groups/{group['id']}/blocks/detach/{team.id}")
    assert get(client, f"/v1/groups/{group['id']}")["shared_block_ids"] == []
    for agent in (ann, bob):
        assert team.id not in [b.id for b in client.agents.blocks.list(agent.id)]
    patch(client, f"/v1/groups/{group['id']}/blocks/attach/{team.id}")
    assert team.id in [b.id for b in client.agents.blocks.list(bob.id)]


def test_a_member_run_that_fails_is_answered_as_an_error_naming_it(client: Letta,
                                                                  script: Any) -> None:
    ann = new_agent(client, name="ann")
    group = post(client, "/v1/groups", {"agent_ids": [ann.id], "description": ""})
    script.set(error("invalid_request", "the provider said no"))
    with pytest.raises(letta_client.BadRequestError) as caught:
        post(client, f"/v1/groups/{group['id']}/messages", {"input": "hi"})
    body = caught.value.body
    assert isinstance(body, dict) and body["stop_reason"] == "llm_api_error"
    assert "the provider said no" in body["detail"]
    assert body["run_id"] == client.runs.list(agent_id=ann.id).items[0].id


def test_a_sleeptime_group_made_here_is_stored_listed_and_sent_to_its_main_agent(
        server: Server, client: Letta, script: Script) -> None:
    main, memory = new_agent(client), new_agent(client)
    group = post(client, "/v1/groups", {
        "agent_ids": [memory.id], "description": "", "manager_config": {
            "manager_type": "sleeptime", "manager_agent_id": main.id,
            "sleeptime_agent_frequency": 3}})
    assert_letta_shape("/v1/groups/", "post", group)
    assert (group["manager_type"], group["manager_agent_id"],
            group["sleeptime_agent_frequency"], group["turns_counter"]) == (
        "sleeptime", main.id, 3, -1)
    listed = client.get("/v1/groups", cast_to=object,
                        options={"params": {"manager_type": "sleeptime"}})
    assert group["id"] in [g["id"] for g in listed]  # type: ignore[union-attr]
    assert [g["id"] for g in get(client, f"/v1/agents/{memory.id}/groups")] == [group["id"]]
    state = client.agents.retrieve(main.id, include=["agent.managed_group"])
    assert state.multi_agent_group.id == group["id"]  # type: ignore[union-attr]
    # As the Letta versions that served this route did: the main agent answers.
    script.set(reply("from the main agent"))
    response = httpx.post(f"{server.url}/v1/groups/{group['id']}/messages",
                          json={"input": "hi"}, timeout=30)
    assert response.status_code == 200
    assert [m.get("content") for m in response.json()["messages"]
            if m["message_type"] == "assistant_message"] == ["from the main agent"]
