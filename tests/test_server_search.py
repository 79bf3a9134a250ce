"""Search across agents through letta-client: every agent's messages listed and searched
(full text), the ranked search of stored messages, and passages searched by meaning; each
answer checked against Letta's document."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from letta_spec import assert_letta_shape
from stateloop.testing.scripted import reply
from test_server_support import Script, Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)


def _json(response: Any) -> Any:
    return json.loads(response.http_response.text)


@pytest.fixture(scope="module")
def two_agents(server: Server, script: Script) -> tuple[str, str]:
    client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
    zebra, penguin = new_agent(client, name="zebra"), new_agent(client, name="penguin")
    script.set(reply("Noted: stripes."))
    client.agents.messages.create(zebra.id, input="the zebra has black stripes")
    script.set(reply("Noted: birds."))
    client.agents.messages.create(penguin.id, input="a penguin is a flightless bird")
    return zebra.id, penguin.id


def test_messages_of_every_agent_are_listed_a_page_at_a_time(
        client: Letta, two_agents: tuple[str, str]) -> None:
    raw = client.messages.with_raw_response.list(limit=50)
    assert_letta_shape("/v1/messages/", "get", _json(raw))
    users = [m.content for m in raw.parse() if m.message_type == "user_message"]
    assert "the zebra has black stripes" in users and "a penguin is a flightless bird" in users
    [newest] = client.messages.list(limit=1)  # the newest message, of whichever agent
    assert newest.content == "Noted: birds."  # type: ignore[union-attr]
    older = client.messages.list(before=newest.id, limit=1, order="desc")
    assert older[0].content == "a penguin is a flightless bird"  # type: ignore[union-attr]
    assert list(client.messages.list(after=newest.id)) == []
    only = client.messages.list(include_return_message_types=["assistant_message"], limit=50)
    assert {m.message_type for m in only} == {"assistant_message"}


def test_search_all_messages_finds_them_in_any_agent(
        client: Letta, two_agents: tuple[str, str]) -> None:
    zebra, penguin = two_agents
    raw = client.messages.with_raw_response.search(query="zebra black")
    body = _json(raw)
    assert_letta_shape("/v1/messages/search", "post", body)
    assert [(r["message_type"], r["agent_id"]) for r in body] == [("user_message", zebra)]
    assert raw.parse()[0].content == "the zebra has black stripes"  # type: ignore[union-attr]
    assert client.messages.search(query="zebra", agent_id=penguin) == []
    assert len(client.messages.search(query="noted", search_mode="fts")) == 2
    assert client.messages.search(query="zebra", end_date="2000-01-01") == []


def test_ranked_message_search_across_agents(client: Letta, server: Server,
                                            two_agents: tuple[str, str]) -> None:
    zebra, penguin = two_agents
    found = client.post("/v1/agents/messages/search", cast_to=object,
                        body={"query": "penguin bird", "roles": ["user"]})
    assert_letta_shape("/v1/agents/messages/search", "post", found)
    assert isinstance(found, list) and len(found) == 1
    [hit] = found
    assert (hit["message"]["agent_id"], hit["fts_rank"]) == (penguin, 1)
    assert hit["embedded_text"] == "a penguin is a flightless bird"
    assert hit["rrf_score"] == pytest.approx(1 / 61)
    recent = httpx.post(f"{server.url}/v1/agents/messages/search",
                        json={"agent_id": zebra, "roles": ["assistant"]}).json()
    assert [r["embedded_text"] for r in recent] == ["Noted: stripes."]  # no query: newest
    assert httpx.post(f"{server.url}/v1/agents/messages/search",
                      json={"agent_id": "agent-nope", "query": "x"}).status_code == 404
    assert httpx.post(f"{server.url}/v1/agents/messages/search",
                      json={"query": "x", "start_date": "soon"}).status_code == 422


def test_passages_searched_by_agent_archive_or_everywhere(client: Letta) -> None:
    agent = new_agent(client)
    kept = client.agents.passages.create(agent.id, text="Ada owns the release.",
                                         tags=["people"])[0]
    other = client.archives.create(name="elsewhere")
    far = client.archives.passages.create(other.id, text="The office is in Lisbon.")
    raw = client.passages.with_raw_response.search(agent_id=agent.id,
                                                   query="Ada owns the release.")
    assert_letta_shape("/v1/passages/search", "post", _json(raw))
    [hit] = raw.parse()
    assert hit.passage.id == kept.id and hit.score > 0.99
    by_archive = client.passages.search(archive_id=other.id, query="Lisbon office")
    assert [h.passage.id for h in by_archive] == [far.id]
    everywhere = {h.passage.id for h in client.passages.search(query="release", limit=50)}
    assert {kept.id, far.id} <= everywhere
    tagged = client.passages.search(tags=["people"], limit=50)  # no query: a filtered listing
    assert kept.id in {h.passage.id for h in tagged}
    assert far.id not in {h.passage.id for h in tagged}
    with pytest.raises(letta_client.NotFoundError):
        client.passages.search(archive_id="archive-nope", query="x")
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.passages.search(query="x", start_date="never")
