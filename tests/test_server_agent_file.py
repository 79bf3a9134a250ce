"""Agent Files over REST through letta-client: Letta's files import, run a tool and
round-trip; bad files are a 400 naming the problem, with nothing stored."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from letta_client import Letta

from af_support import (
    BAD_NUMBERS,
    FIXTURES,
    OVER_LIMIT,
    SHOUT,
    bad_cases,
    file_with,
    file_with_bad_items,
    minimal_file,
    normalised,
    over_limit_file,
)
from fake_script import Script
from letta_spec import assert_letta_shape
from stateloop.testing import call, reply
from test_server_support import Server, client, fake, script, server  # noqa: F401 (fixtures)

TURNS = {"memgpt_agent.af": call("memory_insert", label="human", new_string="Likes tea."),
         "outreach_workflow_agent.af": call("retrieve_candidate", candidate_name="Ada")}


def _import(client: Letta, text: str | bytes, **options: object) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return client.agents.import_file(file=("agent.af", data), **options).agent_ids  # type: ignore[arg-type]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_letta_files_import_run_a_tool_and_export_what_reimports_identically(
        client: Letta, script: Script, path: Path) -> None:
    [agent_id] = _import(client, path.read_bytes())
    agent = client.agents.retrieve(agent_id)
    assert agent.name == path.stem + "_copy"  # Letta's default: append_copy_suffix
    script.set(TURNS[path.name], reply("Done."))
    response = client.agents.messages.create(agent_id, input="Go on.")
    returns = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert returns and returns[0].status == "success", returns
    text = client.agents.export_file(agent_id)
    exported = json.loads(text)
    [again] = _import(client, text, append_copy_suffix=False)
    assert again != agent_id
    assert normalised(json.loads(client.agents.export_file(again))) == normalised(exported)
    assert client.agents.retrieve(again).name == agent.name


def test_export_scrubs_messages_and_answers_404_and_400_as_letta(client: Letta,
                                                                server: Server) -> None:
    [agent_id] = _import(client, json.dumps(minimal_file()), name="renamed")
    assert client.agents.retrieve(agent_id).name == "renamed"
    scrubbed = httpx.post(f"{server.url}/v1/agents/{agent_id}/export",
                          json={"scrub_messages": True}).json()
    assert [m["role"] for m in scrubbed["agents"][0]["messages"]] == ["system"]
    missing = httpx.get(f"{server.url}/v1/agents/agent-nope/export")
    assert missing.status_code == 404
    legacy = httpx.get(f"{server.url}/v1/agents/{agent_id}/export",
                       params={"use_legacy_format": "true"})
    assert legacy.status_code == 400


BROKEN = {"id": "tool-0", "name": "broken", "tool_type": "custom",
          "source_code": "def broken(x: str:\n    return x\n",
          "json_schema": {"name": "broken", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("case", ["truncated", "wrong types", "unknown version", "bad tool",
                                  "huge"])
def test_a_bad_file_is_a_clear_4xx_and_stores_nothing(client: Letta, server: Server,
                                                      case: str) -> None:
    before = len(client.agents.list(limit=1000).items)
    if case == "truncated":
        body, expected = json.dumps(minimal_file()).encode()[:-30], "not valid JSON"
    elif case == "wrong types":
        body, expected = json.dumps(minimal_file(tool_rules={"a": 1})).encode(), "tool_rules"
    elif case == "unknown version":
        body, expected = b'{"version": "9.9"}', "'9.9'"
    elif case == "bad tool":
        data = {**minimal_file(tool_ids=["tool-0"]), "tools": [BROKEN]}
        body, expected = json.dumps(data).encode(), "'broken'"
    else:
        body, expected = b" " * (100 * 1024 * 1024), "limit"  # the body cap: a 413
    response = httpx.post(f"{server.url}/v1/agents/import", timeout=60,
                          headers={"X-Requested-With": "test"}, data={"strict": "true"},
                          files={"file": ("agent.af", body)})
    assert 400 <= response.status_code < 500, response.text
    assert expected in response.json()["detail"], response.text
    assert len(client.agents.list(limit=1000).items) == before


def _stored(client: Letta) -> tuple[set[str], set[str], set[str]]:
    """The ids of every agent and block, the names of every tool."""
    return ({a.id for a in client.agents.list(limit=1000).items},
            {b.id for b in client.blocks.list(limit=1000).items},
            {t.name for t in client.tools.list(limit=1000).items})


@pytest.mark.parametrize(("field", "body"), [
    pytest.param(field, body, id=f"{field}={'surrogate' if b'ud800' in body else literal}")
    for (field, body), literal in zip(bad_cases(), [*list(BAD_NUMBERS) * 3, *[""] * 3],
                                      strict=True)])
def test_a_value_the_json_routes_refuse_is_refused_naming_its_field_and_stores_nothing(
        client: Letta, server: Server, field: str, body: bytes) -> None:
    before = _stored(client)
    response = httpx.post(f"{server.url}/v1/agents/import",
                          headers={"X-Requested-With": "test"},
                          files={"file": ("agent.af", body)})
    assert response.status_code == 400, response.text
    assert response.json()["detail"].startswith(f"{field}: "), response.text
    assert _stored(client) == before  # no agent, block or tool left behind
    assert httpx.get(f"{server.url}/v1/agents").status_code == 200


def test_a_tool_source_over_the_limit_is_left_out_or_refused_in_strict_mode(
        client: Letta, server: Server) -> None:
    """As ``POST /v1/tools`` refuses it: a source of over 1,000,000 bytes is never parsed."""
    padding = "# " + "x" * 1_100_000 + "\n"
    body = file_with(("tools", 0, "source_code"), json.dumps(padding + SHOUT["source_code"]))
    before = _stored(client)
    response = httpx.post(f"{server.url}/v1/agents/import",
                          headers={"X-Requested-With": "test"}, data={"strict": "true"},
                          files={"file": ("agent.af", body)})
    assert response.status_code == 400, response.text
    assert "more than the 1000000" in response.json()["detail"], response.text
    assert _stored(client) == before
    lenient = httpx.post(f"{server.url}/v1/agents/import",
                         headers={"X-Requested-With": "test"},
                         files={"file": ("agent.af", body)})
    assert lenient.status_code == 200, lenient.text
    [note] = lenient.json()["notes"]
    assert note.startswith("tool 'shout' left out") and "more than the 1000000" in note
    imported = lenient.json()["agent_ids"][0]
    assert client.agents.retrieve(imported, include=["agent.tools"]).tools == []
    assert "shout" not in _stored(client)[2]


def test_a_letta_export_with_a_block_over_its_limit_imports_with_the_limit_raised(
        client: Letta, server: Server) -> None:
    body = json.dumps(over_limit_file()).encode()
    raw = httpx.post(f"{server.url}/v1/agents/import", headers={"X-Requested-With": "test"},
                     files={"file": ("agent.af", body)})
    assert raw.status_code == 200, raw.text
    assert_letta_shape("/v1/agents/import", "post", raw.json())
    assert raw.json()["notes"] == [
        f"block 'persona': its value has {OVER_LIMIT} characters, over its limit of 10000; "
        f"the value is kept and the limit raised to {OVER_LIMIT}"]
    answer = client.agents.import_file(file=("agent.af", body))
    [persona] = [b for b in client.agents.blocks.list(answer.agent_ids[0])
                 if b.label == "persona"]
    assert (len(persona.value), persona.limit) == (OVER_LIMIT, OVER_LIMIT)
    assert persona.value == next(b["value"] for b in over_limit_file()["blocks"]
                                 if b["label"] == "persona")


def test_what_cannot_be_imported_is_named_and_the_rest_imported_unless_strict(
        client: Letta, server: Server) -> None:
    body = json.dumps(file_with_bad_items()).encode()
    before = _stored(client)
    strict = httpx.post(f"{server.url}/v1/agents/import", headers={"X-Requested-With": "test"},
                        data={"strict": "true"}, files={"file": ("agent.af", body)})
    assert strict.status_code == 400, strict.text
    assert strict.json()["detail"].startswith(
        "tools.3.source_code: tool 'broken': source_code does not compile"), strict.text
    assert _stored(client) == before
    answer = client.agents.import_file(file=("agent.af", body))
    notes = answer.notes  # type: ignore[attr-defined]
    assert [n.split(" left out")[0] for n in notes if " left out" in n] == [
        "tool 'broken'", "blocks.2", "agent 'memgpt_agent_copy': tool rule 0 (no_such_rule)",
        "agent 'memgpt_agent_copy': tool 'tool-missing'",
        "agent 'memgpt_agent_copy': block 'block-missing'"], notes
    agent = client.agents.retrieve(answer.agent_ids[0], include=["agent.tools", "agent.blocks"])
    assert sorted(t.name for t in agent.tools) == [
        "conversation_search", "memory_insert", "memory_replace"]
    assert sorted(b.label for b in agent.memory.blocks) == ["human", "persona"]
    assert agent.tool_rules == []


def test_the_same_file_with_fine_values_imports_with_its_tool(client: Letta,
                                                             server: Server) -> None:
    body = file_with(("agents", 0, "max_tokens"), "4096")
    [agent_id] = _import(client, body)
    agent = client.agents.retrieve(agent_id, include=["agent.tools"])
    assert agent.llm_config.max_tokens == 4096
    assert [t.name for t in agent.tools] == ["shout"]
    assert httpx.get(f"{server.url}/v1/agents").status_code == 200
