"""Archives over REST through letta-client: one archive shared by two agents, attach and
detach, passages added to an archive, and every answer checked against Letta's document."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from letta_spec import assert_letta_shape
from stateloop.testing.scripted import call, reply
from test_server_support import Script, Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)


def _json(response: Any) -> Any:
    return json.loads(response.http_response.text)


def test_an_archive_shared_by_two_agents(client: Letta, server: Server, script: Script) -> None:
    made = client.archives.with_raw_response.create(name="team notes",
                                                    description="what the team knows")
    assert_letta_shape("/v1/archives/", "post", _json(made))
    archive = made.parse()
    assert (archive.name, archive.vector_db_provider) == ("team notes", "native")
    writer = new_agent(client, name="writer")
    reader = new_agent(client, name="reader", tools=["archival_memory_search"])
    for agent in (writer, reader):
        client.agents.archives.attach(archive.id, agent_id=agent.id)

    # the writer's own inserts go to the archive it reaches; the reader finds them
    client.agents.passages.create(writer.id, text="The launch moved to Tuesday.")
    added = client.archives.passages.with_raw_response.create(
        archive.id, text="Ada owns the release.", tags=["people"], metadata={"src": "wiki"})
    assert_letta_shape("/v1/archives/{archive_id}/passages", "post", _json(added))
    assert added.parse().archive_id == archive.id
    listed = client.agents.passages.list(reader.id)
    assert [p.text for p in listed] == ["The launch moved to Tuesday.", "Ada owns the release."]
    script.set(call("archival_memory_search", query="The launch moved to Tuesday."),
               reply("Tuesday."))
    answer = client.agents.messages.create(reader.id, input="When is the launch?")
    [result] = [m for m in answer.messages if m.message_type == "tool_return_message"]
    assert "The launch moved to Tuesday." in result.tool_return  # type: ignore[union-attr]

    agents = httpx.get(f"{server.url}/v1/archives/{archive.id}/agents?order=asc").json()
    assert_letta_shape("/v1/archives/{archive_id}/agents", "get", agents)
    assert [a["id"] for a in agents] == [writer.id, reader.id]
    by_agent = client.archives.with_raw_response.list(agent_id=reader.id)
    assert_letta_shape("/v1/archives/", "get", _json(by_agent))
    assert [a.id for a in by_agent.parse()] == [archive.id]

    # detaching takes access, not data
    client.agents.archives.detach(archive.id, agent_id=reader.id)
    assert list(client.agents.passages.list(reader.id)) == []
    assert len(list(client.agents.passages.list(writer.id))) == 2
    # deleting an agent keeps the archive it used, as in Letta
    client.agents.delete(writer.id)
    assert client.archives.retrieve(archive.id).name == "team notes"
    client.agents.archives.attach(archive.id, agent_id=reader.id)
    assert len(list(client.agents.passages.list(reader.id))) == 2


def test_archive_crud_batches_and_passage_deletion(client: Letta, server: Server) -> None:
    archive = client.archives.create(name="crud")
    changed = client.archives.with_raw_response.update(archive.id, description="renamed",
                                                       name="crud 2")
    assert_letta_shape("/v1/archives/{archive_id}", "patch", _json(changed))
    assert (changed.parse().name, changed.parse().description) == ("crud 2", "renamed")
    got = client.archives.with_raw_response.retrieve(archive.id)
    assert_letta_shape("/v1/archives/{archive_id}", "get", _json(got))
    assert [a.id for a in client.archives.list(name="crud 2")] == [archive.id]

    batch = client.archives.passages.with_raw_response.create_many(
        archive.id, passages=[{"text": "one", "tags": ["a"]},
                              {"text": "two", "created_at": "2024-05-01T10:00:00Z"}])
    assert_letta_shape("/v1/archives/{archive_id}/passages/batch", "post", _json(batch))
    one, two = batch.parse()
    assert (one.tags, two.created_at.year) == (["a"], 2024)  # type: ignore[union-attr]
    client.archives.passages.delete(one.id, archive_id=archive.id)
    gone = httpx.delete(f"{server.url}/v1/archives/{archive.id}/passages/{one.id}")
    assert gone.status_code == 404

    client.archives.delete(archive.id)
    with pytest.raises(letta_client.NotFoundError):
        client.archives.retrieve(archive.id)
    with pytest.raises(letta_client.NotFoundError):
        client.archives.passages.create(archive.id, text="nowhere")


def test_archive_input_errors_are_4xx(client: Letta, server: Server) -> None:
    archive = client.archives.create(name="errors")
    agent = new_agent(client)
    bad_time = httpx.post(f"{server.url}/v1/archives/{archive.id}/passages",
                          json={"text": "x", "created_at": "not a time"})
    assert bad_time.status_code == 422 and "created_at" in str(bad_time.json())
    assert httpx.post(f"{server.url}/v1/archives", json={"name": ""}).status_code == 422
    for path in (f"/v1/agents/{agent.id}/archives/attach/archive-nope",
                 f"/v1/agents/agent-nope/archives/attach/{archive.id}",
                 f"/v1/agents/{agent.id}/archives/detach/archive-nope"):
        assert httpx.patch(f"{server.url}{path}").status_code == 404, path
    assert httpx.get(f"{server.url}/v1/archives/archive-nope/agents").status_code == 404
    assert httpx.delete(f"{server.url}/v1/archives/archive-nope").status_code == 404
