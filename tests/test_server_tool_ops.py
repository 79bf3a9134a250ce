"""``/v1/tools`` operations besides the registry's own, through letta-client (its method where
it has one, its generic ``post`` otherwise): run source once, a schema from source, search,
the built-in tools written anew. Every answer is checked against Letta's document."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from typing import Any

import letta_client
import pytest
from letta_client import Letta

from letta_spec import assert_letta_shape
from stateloop.tools.builtin import builtin_names
from test_server_support import client, fake, script, server  # noqa: F401 (fixtures)

SHOUT = '''
def shout(text: str, times: int = 1) -> str:
    """Say it loudly.

    Args:
        text: What to say.
        times: How many times.
    """
    return text.upper() * times
'''

GREET = '''
import os

def greet() -> str:
    """Greet from the environment."""
    return os.environ["GREETING"]
'''

FAIL = '''
def fail() -> str:
    """Always fails."""
    raise ValueError("no luck")
'''


def _post(client: Letta, path: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(path, cast_to=object, body=body)


def test_run_from_source_returns_a_tool_return_message(client: Letta) -> None:
    result = _post(client, "/v1/tools/run",
                   {"source_code": SHOUT, "args": {"text": "hi", "times": 2}})
    assert_letta_shape("/v1/tools/run", "post", result)
    assert result["message_type"] == "tool_return_message"
    assert (result["status"], result["tool_return"]) == ("success", "HIHI")
    env = _post(client, "/v1/tools/run", {"source_code": GREET, "args": {},
                                          "env_vars": {"GREETING": "Hello from env"}})
    assert env["tool_return"] == "Hello from env"
    failed = _post(client, "/v1/tools/run", {"source_code": FAIL, "args": {}})
    assert failed["status"] == "error"
    assert failed["tool_return"] == "Error executing function fail: ValueError: no luck"
    assert "no luck" in "".join(failed["stderr"])
    assert_letta_shape("/v1/tools/run", "post", failed)
    assert not any(t.name in ("shout", "greet", "fail") for t in client.tools.list())


def test_run_from_source_refuses_bad_input_by_name(client: Letta) -> None:
    with pytest.raises(letta_client.UnprocessableEntityError, match="source_code"):
        _post(client, "/v1/tools/run", {"source_code": "x = 1", "args": {}})
    with pytest.raises(letta_client.UnprocessableEntityError, match="source_code"):
        _post(client, "/v1/tools/run", {"source_code": SHOUT, "name": "nope", "args": {}})
    with pytest.raises(letta_client.UnprocessableEntityError, match="source_type"):
        _post(client, "/v1/tools/run",
              {"source_code": SHOUT, "source_type": "typescript", "args": {}})
    with pytest.raises(letta_client.UnprocessableEntityError, match="env"):
        _post(client, "/v1/tools/run",
              {"source_code": GREET, "args": {}, "env_vars": {"1BAD": "x"}})


def test_generate_schema_reads_signature_and_docstring(client: Letta) -> None:
    schema = _post(client, "/v1/tools/generate-schema", {"code": SHOUT})
    assert_letta_shape("/v1/tools/generate-schema", "post", schema)
    assert schema["name"] == "shout" and schema["description"] == "Say it loudly."
    assert schema["parameters"]["properties"]["times"]["type"] == "integer"
    assert schema["parameters"]["properties"]["text"]["description"] == "What to say."
    assert schema["parameters"]["required"] == ["text"]
    with pytest.raises(letta_client.UnprocessableEntityError, match="code"):
        _post(client, "/v1/tools/generate-schema", {"code": "def broken(:"})
    with pytest.raises(letta_client.UnprocessableEntityError, match="source_type"):
        _post(client, "/v1/tools/generate-schema",
              {"code": "function f() {}", "source_type": "typescript"})


def test_search_ranks_by_name_then_description(client: Letta) -> None:
    client.tools.upsert(source_code=SHOUT, tags=["voice"])
    client.tools.upsert(source_code=SHOUT.replace("def shout", "def whisper").replace(
        "Say it loudly.", "Say it softly, never shout."), tags=["voice", "quiet"])
    found = client.tools.search(query="shout")
    assert [r.tool.name for r in found[:2]] == ["shout", "whisper"]
    assert found[0].combined_score > found[1].combined_score > 0
    assert [r.fts_rank for r in found[:2]] == [1, 2]
    raw = _post(client, "/v1/tools/search", {"query": "shout"})  # as sent, not as parsed
    assert_letta_shape("/v1/tools/search", "post", raw)
    quiet = client.tools.search(query="say", tags=["quiet"])
    assert [r.tool.name for r in quiet] == ["whisper"]
    core = client.tools.search(tool_types=["letta_core"], limit=2)
    assert len(core) == 2 and all(r.tool.tool_type == "letta_core" for r in core)
    assert client.tools.search(query="zzzz") == []
    with pytest.raises(letta_client.UnprocessableEntityError, match="limit"):
        client.tools.search(query="shout", limit=0)


def test_add_base_tools_upserts_the_built_in_tools(client: Letta) -> None:
    listed = {t.name: t.id for t in client.tools.list(limit=100)}
    tools = _post(client, "/v1/tools/add-base-tools")
    assert_letta_shape("/v1/tools/add-base-tools", "post", tools)
    assert sorted(t["name"] for t in tools) == builtin_names()
    assert all(t["id"] == listed[t["name"]] for t in tools)  # the same rows, not copies
