"""Hostile and malformed request bodies: refused with a 422 naming the value, nothing stored,
the server and the connection fine afterwards. Real HTTP against the real app."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared_fixtures import LETTA_AF
from stateloop.storable import MAX_DEPTH, check_json
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, client, fake, script, server, settings_for  # noqa: F401 (fixtures)

DOUBLE = '''
def double(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    return 2 * x
'''


def nested(levels: int) -> dict[str, Any]:
    """``{"a": {"a": ... {}}}``: ``levels`` objects inside each other."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def nested_text(levels: int) -> str:
    """``nested(levels)`` as JSON text, written directly: encoders recurse, and stop early."""
    return '{"a": ' * (levels - 1) + "{}" + "}" * (levels - 1)


def raw(http: httpx.Client, path: str, text: str | bytes) -> httpx.Response:
    """POST a body exactly as written (``json=`` could not carry NaN or a lone surrogate)."""
    body = text.encode() if isinstance(text, str) else text
    return http.post(path, content=body, headers={"content-type": "application/json"})


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def agent_id(http: httpx.Client) -> str:
    created = http.post("/v1/agents", json={
        "name": "target", "model": "openai/gpt-4o-mini", "include_base_tools": False,
        "memory_blocks": [{"label": "human", "value": "Name: Ada"}]})
    assert created.status_code == 200, created.text
    agent: str = created.json()["id"]
    return agent


def refused(response: httpx.Response, loc: list[Any], kind: str) -> None:
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert (error["loc"], error["type"]) == (["body", *loc], kind), error


@pytest.mark.parametrize(("path", "body", "loc"), [
    ("/v1/blocks", f'{{"label": "deep", "value": "v", "metadata": {nested_text(300)}}}',
     ["metadata"]),
    ("/v1/agents", f'{{"name": "deep", "metadata": {nested_text(999)}}}', ["metadata"]),
    ("/v1/tools", f'{{"source_code": {json.dumps(DOUBLE)}, "json_schema": {{"name": "double", '
     f'"parameters": {nested_text(500)}}}}}', ["json_schema", "parameters"]),
])
def test_deep_json_is_refused_and_every_list_still_works(
        http: httpx.Client, path: str, body: str, loc: list[Any]) -> None:
    response = raw(http, path, body)
    # The path goes down to the first object past the limit (the body itself is level 1).
    refused(response, [*loc, *["a"] * (MAX_DEPTH - len(loc))], "too_deep")
    assert response.json()["detail"][0]["msg"] == f"nested deeper than {MAX_DEPTH} levels"
    for listing in ("/v1/agents", "/v1/blocks", "/v1/tools"):
        assert http.get(listing).status_code == 200
    assert "deep" not in [b["label"] for b in http.get("/v1/blocks").json()]


def test_nesting_far_past_any_parser_is_refused_at_its_path(http: httpx.Client) -> None:
    opened = 500_000  # far deeper than a recursive parser goes
    body = '{"label": "x", "value": "v", "metadata": {"list": [1, ' + "[" * opened + (
        "]" * opened + "]}}")
    refused(raw(http, "/v1/blocks", body), ["metadata", "list", 1, *[0] * (MAX_DEPTH - 3)],
            "too_deep")


def test_nesting_up_to_the_limit_is_stored_and_listed(http: httpx.Client) -> None:
    metadata = nested(MAX_DEPTH - 1)  # with the body around it: exactly MAX_DEPTH levels
    created = http.post("/v1/blocks", json={"label": "at-limit", "value": "v",
                                            "metadata": metadata})
    assert created.status_code == 200, created.text
    assert http.get(f"/v1/blocks/{created.json()['id']}").json()["metadata"] == metadata


@pytest.mark.parametrize(("body", "loc"), [
    ('{"label": "n", "value": "v", "limit": NaN}', ["limit"]),
    ('{"label": "n", "value": "v", "limit": Infinity}', ["limit"]),
    ('{"label": "n", "value": "v", "metadata": {"x": [1, -Infinity]}}', ["metadata", "x", 1]),
    ('{"label": "n", "value": "v", "metadata": {"x": 1e999}}', ["metadata", "x"]),
])
def test_numbers_that_are_not_finite_are_refused(http: httpx.Client, body: str,
                                                 loc: list[Any]) -> None:
    refused(raw(http, "/v1/blocks", body), loc, "finite_number")


@pytest.mark.parametrize("limit", [2**63, 2**64, 10**30, -(2**63) - 1])
def test_integers_outside_64_bits_are_refused(http: httpx.Client, limit: int) -> None:
    response = http.post("/v1/blocks", json={"label": "big", "value": "v", "limit": limit})
    refused(response, ["limit"], "int_out_of_range")
    # The largest that fits is an ordinary limit.
    fits = http.post("/v1/blocks", json={"label": "big", "value": "v", "limit": 2**63 - 1})
    assert fits.status_code == 200, fits.text


def test_lone_surrogates_are_refused_naming_the_field(http: httpx.Client,
                                                      agent_id: str) -> None:
    lone = "\\ud800"  # as JSON escapes it: json.loads makes it a lone surrogate
    cases = [
        (f"/v1/agents/{agent_id}/messages",
         f'{{"messages": [{{"role": "user", "content": "hi {lone}"}}]}}',
         ["messages", 0, "content"]),
        ("/v1/blocks", f'{{"label": "human", "value": "a{lone}b"}}', ["value"]),
        (f"/v1/agents/{agent_id}/core-memory/blocks/human", f'{{"value": "{lone}"}}',
         ["value"]),
        ("/v1/agents", f'{{"name": "bad{lone}"}}', ["name"]),
        (f"/v1/agents/{agent_id}/archival-memory", f'{{"text": "note {lone}"}}', ["text"]),
        ("/v1/tools", json.dumps({"source_code": DOUBLE}).replace("Double", "Double \\udfff"),
         ["source_code"]),
        ("/v1/blocks", f'{{"label": "k", "value": "v", "metadata": {{"key{lone}": 1}}}}',
         ["metadata", "key\ufffd"]),
    ]
    for path, body, loc in cases:
        method = http.patch if path.endswith("/human") else http.post
        response = method(path, content=body.encode(),
                          headers={"content-type": "application/json"})
        refused(response, loc, "string_unicode")
    assert http.get(f"/v1/agents/{agent_id}/archival-memory").json() == []
    assert http.get(f"/v1/agents/{agent_id}/core-memory/blocks/human").json()["value"] == (
        "Name: Ada")
    # A surrogate pair is one real character, and is kept.
    emoji = http.post("/v1/blocks", json={"label": "e", "value": "\U0001f600"})
    assert emoji.status_code == 200 and emoji.json()["value"] == "\U0001f600"


def test_a_body_that_is_not_utf8_is_refused(http: httpx.Client) -> None:
    response = raw(http, "/v1/blocks", b'{"label": "x", "value": "\xff"}')
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body"]
    assert "UTF-8" in response.json()["detail"][0]["msg"]


def test_a_body_that_is_not_json_keeps_fastapis_answer(http: httpx.Client) -> None:
    response = raw(http, "/v1/blocks", '{"label": "x",')
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "json_invalid"


def test_letta_agent_files_and_their_tool_schemas_pass() -> None:
    for path in sorted(LETTA_AF.glob("*.af")):
        text = json.loads(path.read_text())  # the fixtures are JSON strings of the file
        assert check_json(text.encode()) is None, path.name
        for tool in json.loads(text)["tools"]:
            body = {"source_code": tool["source_code"], "json_schema": tool["json_schema"]}
            assert check_json(json.dumps(body).encode()) is None, tool["name"]


def test_a_tool_with_a_nested_schema_is_created(http: httpx.Client) -> None:
    schema = {"name": "double", "description": "Double a number.", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer", "description": "n"}},
        "required": ["x"]}}
    created = http.post("/v1/tools", json={"source_code": DOUBLE, "json_schema": schema})
    assert created.status_code == 200, created.text


def test_a_500_leaves_the_connection_usable(fake: FakeOpenAI, tmp_path: Path) -> None:
    db = tmp_path / "broken.db"
    with Server(settings_for(fake, db)) as server, httpx.Client(base_url=server.url) as http:
        assert http.get("/v1/blocks").status_code == 200
        with sqlite3.connect(db) as broken:  # the store fails for real from now on
            broken.execute("DROP TABLE blocks_agents")
            broken.execute("DROP TABLE blocks")
        failed = http.get("/v1/blocks")
        connection = local_address(failed)
        assert failed.status_code == 500
        assert failed.json() == {"detail": "internal server error (the server's log has the "
                                           "details)"}
        # The same connection answers the next request.
        health = http.get("/v1/health")
        assert health.status_code == 200
        assert local_address(health) == connection
        assert http.get("/v1/blocks").status_code == 500


def local_address(response: httpx.Response) -> tuple[str, int]:
    """The client's end of the connection that carried ``response``."""
    address: tuple[str, int] = response.extensions["network_stream"].get_extra_info(
        "client_addr")
    return address


@pytest.mark.parametrize("levels", [900, 5000])  # 5000: past what json.loads can read
def test_rows_stored_too_deep_before_the_limit_are_listed_cut(fake: FakeOpenAI, tmp_path: Path,
                                                               levels: int) -> None:
    db = tmp_path / "old.db"
    with Server(settings_for(fake, db)) as server, httpx.Client(base_url=server.url) as http:
        block = http.post("/v1/blocks", json={"label": "old", "value": "v"}).json()
        agent = http.post("/v1/agents", json={"name": "old", "include_base_tools": False,
                                              "model": "openai/gpt-4o-mini"}).json()
        tool = http.post("/v1/tools", json={"source_code": DOUBLE}).json()
        # What a server without the body checks stored: hundreds of levels of metadata.
        deep = f'{{"keep": 1, "deep": {nested_text(levels)}}}'
        with sqlite3.connect(db) as old:
            old.execute("UPDATE blocks SET metadata = ? WHERE id = ?", (deep, block["id"]))
            old.execute("UPDATE agents SET metadata = ? WHERE id = ?", (deep, agent["id"]))
            old.execute("UPDATE tools SET json_schema = ? WHERE id = ?", (deep, tool["id"]))
        blocks = http.get("/v1/blocks")
        assert blocks.status_code == 200, blocks.text
        [shown] = [b["metadata"] for b in blocks.json() if b["id"] == block["id"]]
        assert shown["keep"] == 1
        cut = shown["deep"]
        for _ in range(MAX_DEPTH - 1):  # the metadata object is level 1
            cut = cut["a"]
        assert cut == f"(nested deeper than {MAX_DEPTH} levels: not shown)"
        agents = http.get("/v1/agents")
        assert agents.status_code == 200, agents.text
        assert [a["metadata"]["keep"] for a in agents.json()] == [1]
        tools = http.get("/v1/tools")
        assert tools.status_code == 200, tools.text
        assert [t["json_schema"]["keep"] for t in tools.json() if t["id"] == tool["id"]] == [1]
        # The row itself keeps everything.
        with sqlite3.connect(db) as old:
            [(stored,)] = old.execute("SELECT metadata FROM blocks WHERE id = ?", (block["id"],))
        assert stored == deep


def test_a_typical_body_passes_the_check() -> None:
    body = {"messages": [{"role": "user", "content": "What is 1+2? \U0001f600"}],
            "stream_tokens": True, "include_return_message_types": ["assistant_message"],
            "metadata": {"n": 2**63 - 1, "f": 1e300, "neg": -(2**63)}}
    assert check_json(json.dumps(body).encode()) is None


def test_wide_bodies_are_walked_to_the_value_at_fault() -> None:
    items: list[dict[str, Any]] = [{"n": index, "f": 1e30} for index in range(100)]
    assert check_json(json.dumps({"items": items}).encode()) is None
    items[99]["n"] = 2**64  # orjson reads it as a float: the check reads it again
    problem = check_json(json.dumps({"items": items}).encode())
    assert problem is not None and problem.loc == ("items", 99, "n")
    assert check_json(b'{"id": "12345678901234567890123", "n": [' + b"[]," * 99 + b"[]]}") is (
        None)  # a long digit run inside a string is no integer


def test_a_block_label_an_agent_cannot_render_is_refused_by_name(
        http: httpx.Client, agent_id: str) -> None:
    made = http.post("/v1/blocks", json={"label": "a b", "value": "v"})
    refused(made, ["label"], "value_error")
    block = http.post("/v1/blocks", json={"label": "notes", "value": "v"}).json()
    refused(http.patch(f"/v1/blocks/{block['id']}", json={"label": "x\ty"}), ["label"],
            "value_error")
    refused(http.patch(f"/v1/agents/{agent_id}/core-memory/blocks/human",
                       json={"label": "\x1a"}), ["label"], "value_error")
    assert http.get(f"/v1/blocks/{block['id']}").json()["label"] == "notes"
    assert http.get(f"/v1/agents/{agent_id}/core-memory/blocks/human").status_code == 200
