"""A stored agent that its response cannot carry (an older version's row: NaN or infinity in
its model settings or metadata, a string for its context window)
never breaks a list: ``GET /v1/agents`` answers 200 with the agent marked in
``metadata.error``, through letta-client too and after a restart; ``GET`` by id answers 409
naming the fields; the agent can still be deleted. Blocks and tools are listed the same way."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
from letta_client import Letta

from stateloop.server.models.responses import AgentState
from stateloop.server.services.unreadable import readable, unreadable
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, client, fake, new_agent, script, server, settings_for  # noqa: F401 (fixtures)


def _spoil(db: Path, row_id: str, column: str, change: dict[str, object],
           table: str = "agents") -> None:
    """Write ``change`` into the row's JSON ``column`` as Python's json module writes it
    (``NaN``, ``Infinity``, any integer), as no way in lets through today."""
    with sqlite3.connect(db) as con:
        [text] = con.execute(f"SELECT {column} FROM {table} WHERE id = ?",
                             (row_id,)).fetchone()
        value = {**json.loads(text), **change}
        con.execute(f"UPDATE {table} SET {column} = ? WHERE id = ?", (json.dumps(value), row_id))
    con.close()


def test_a_stored_agent_that_cannot_be_shown_is_listed_marked_and_named_by_get(
        fake: FakeOpenAI, tmp_path: Path) -> None:
    db = tmp_path / "stateloop.db"
    with Server(settings_for(fake, db)) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
        deep: dict[str, object] = {"end": True}
        for _ in range(60):  # as deep as a request body may nest it: shown as it is
            deep = {"a": deep}
        notes = client.blocks.create(label="notes", value="kept", metadata=deep)
        good = new_agent(client, name="good", metadata={"team": "a"},
                         block_ids=[notes.id]).id
        infinite = new_agent(client, name="infinite").id
        worse = new_agent(client, name="worse", metadata={"team": "b"}).id
    _spoil(db, infinite, "llm_config", {"max_tokens": float("inf")})
    _spoil(db, worse, "llm_config", {"context_window": "big",
                                     "model_settings": {"temperature": float("nan")}})
    _spoil(db, worse, "metadata", {"count": float("-inf"), "big": 2**70})
    for _ in range(2):  # and again after a restart
        with Server(settings_for(fake, db)) as server:
            listed = httpx.get(f"{server.url}/v1/agents", timeout=30)
            assert listed.status_code == 200, listed.text
            by_id = {agent["id"]: agent for agent in listed.json()}
            assert by_id[good]["metadata"] == {"team": "a"}
            mark = by_id[infinite]["metadata"]["error"]
            assert mark["type"] == "unreadable_record"
            assert list(mark["fields"]) == ["llm_config.max_tokens"]
            assert by_id[infinite]["name"] == "infinite"
            assert by_id[infinite]["llm_config"]["max_tokens"] is None
            assert by_id[infinite]["llm_config"]["context_window"] == 128000  # the rest shown
            mark = by_id[worse]["metadata"]["error"]
            assert set(mark["fields"]) == {"llm_config.context_window",
                                           "llm_config.temperature", "metadata.count"}
            assert by_id[worse]["metadata"]["team"] == "b"
            assert by_id[worse]["metadata"]["big"] == 2**70  # JSON carries it: shown

            client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
            agents = {agent.id: agent for agent in client.agents.list(limit=100).items}
            assert agents.keys() == {good, infinite, worse}
            assert agents[infinite].name == "infinite"
            assert (agents[infinite].metadata or {})["error"]["type"] == "unreadable_record"
            assert client.agents.retrieve(good).name == "good"

            for agent_id, field in ((infinite, "llm_config.max_tokens"),
                                    (worse, "llm_config.context_window")):
                answer = httpx.get(f"{server.url}/v1/agents/{agent_id}")
                assert answer.status_code == 409, answer.text
                assert field in answer.json()["detail"] and agent_id in answer.json()["detail"]
    with Server(settings_for(fake, db)) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
        client.agents.delete(infinite)
        assert {a.id for a in client.agents.list().items} == {good, worse}


def test_a_stored_block_or_tool_that_cannot_be_shown_is_listed_marked(
        fake: FakeOpenAI, tmp_path: Path) -> None:
    db = tmp_path / "stateloop.db"
    with Server(settings_for(fake, db)) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
        block = client.blocks.create(label="notes", value="kept").id
        tools = httpx.post(f"{server.url}/v1/tools/add-base-tools", timeout=30).json()
        _spoil(db, block, "metadata", {"weight": float("nan")}, table="blocks")
        _spoil(db, tools[0]["id"], "json_schema", {"version": float("nan")}, table="tools")
        [shown] = [b for b in client.blocks.list(limit=100).items if b.id == block]
        assert shown.value == "kept"
        assert (shown.metadata or {})["error"]["fields"] == {
            "metadata.weight": "numbers must be finite (not NaN or Infinity)"}
        listed = httpx.get(f"{server.url}/v1/tools", params={"limit": 1000}, timeout=30)
        assert listed.status_code == 200, listed.text
        [tool] = [t for t in listed.json() if t["id"] == tools[0]["id"]]
        assert list(tool["metadata_"]["error"]["fields"]) == ["json_schema.version"]
        assert len(client.tools.list(limit=1000).items) == len(tools)


def test_text_with_a_lone_surrogate_is_shown_replaced_and_the_fields_named(
        fake: FakeOpenAI, tmp_path: Path) -> None:
    with Server(settings_for(fake, tmp_path / "stateloop.db")) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
        view = httpx.get(f"{server.url}/v1/agents/{new_agent(client, name='ada').id}").json()
    assert readable(AgentState, view) is view and unreadable(view) is None
    view["name"] = "ada \udc80"  # what no driver writes, held in a view all the same
    view["blocks"][0]["limit"] = "lots"
    shown = readable(AgentState, view)
    assert shown["name"] == "ada \ufffd" and shown["blocks"][0]["limit"] == 0
    assert list(shown["metadata"]["error"]["fields"]) == ["name", "blocks.0.limit"]
    assert "blocks.0.limit" in (unreadable(shown) or "")
    assert view["name"] == "ada \udc80"  # the record's own view is left as it was
    AgentState.model_validate(shown)
    json.dumps(shown, allow_nan=False).encode()
