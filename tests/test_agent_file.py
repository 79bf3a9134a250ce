"""Agent Files in the library: Letta's own files import, run and round-trip exactly; ids are
remapped; blocks, tools, rules and history keep their meaning; bad files store nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from af_support import FIXTURES, bad_cases, message, minimal_file, normalised, tool_call
from stateloop import Agent
from stateloop.agent_file import AgentFileError, ImportOptions, export_agents, import_agents
from stateloop.errors import ConfigError
from stateloop.store import open_store
from stateloop.testing import ScriptedModel, assert_transcript_valid, call, reply


def _store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'af.db'}"


def _count(store: str) -> int:
    async def go() -> int:
        db = await open_store(store)
        try:
            return len(await db.list_agents())
        finally:
            await db.close()

    return asyncio.run(go())


TURNS = {"memgpt_agent.af": [call("memory_insert", label="human", new_string="Likes tea."),
                             reply("Noted.")],
         "outreach_workflow_agent.af": [call("retrieve_candidate", candidate_name="Ada"),
                                        reply("Retrieved.")]}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_letta_files_import_run_a_tool_export_and_reimport_identically(
        path: Path, tmp_path: Path) -> None:
    store = _store(tmp_path)
    model = ScriptedModel(TURNS[path.name])
    agent = Agent.import_file(path, store=store, model=model)
    original = json.loads(json.loads(path.read_text()))["agents"][0]
    assert agent.name == original["name"]
    assert agent.system == original["system"]
    assert [r.type for r in agent.tool_rules] == [r["type"] for r in original["tool_rules"]]
    result = agent.run_sync("Go on.")
    assert result.stop_reason == "end_turn", result
    tool_messages = [m for m in result.messages if m.role == "tool"]
    assert tool_messages and not tool_messages[0].is_error, tool_messages[0].text
    if path.name.startswith("outreach"):  # source tool, run in the sandbox
        assert "software engineer working at Letta" in tool_messages[0].text
    else:
        assert "Likes tea." in agent.blocks[0].value
    exported = agent.export_file()
    assert_transcript_valid(agent.messages)

    async def again() -> tuple[dict[str, Any], list[str]]:
        result = await import_agents(exported, store=store)
        return await export_agents(result.agent_ids, store=store), result.agent_ids

    second, ids = asyncio.run(again())
    assert ids[0] != agent.id
    assert normalised(second) == normalised(exported)
    kept = {b["label"]: b for b in exported["blocks"]}
    for block in json.loads(json.loads(path.read_text()))["blocks"]:
        assert kept[block["label"]]["limit"] == block["limit"]
        assert kept[block["label"]]["description"] == block["description"]


def test_an_imported_agent_loads_later_with_its_source_tools_in_the_sandbox(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = FIXTURES[-1]  # outreach_workflow_agent: every tool comes with source
    Agent.import_file(path, store=store, model=ScriptedModel([]))
    model = ScriptedModel([call("retrieve_candidate", candidate_name="Ada"), reply("ok")])
    again = Agent.load(path.stem, store=store, model=model)  # no tools given
    result = again.run_sync("Evaluate Ada.")
    assert "based in SF" in next(m for m in result.messages if m.role == "tool").text


def test_importing_one_file_twice_makes_two_agents_with_nothing_shared(tmp_path: Path) -> None:
    store = _store(tmp_path)

    async def go() -> None:
        first = await import_agents(FIXTURES[0], store=store)
        second = await import_agents(FIXTURES[0], store=store)
        assert first.names == second.names  # the same name twice, as Letta allows
        db = await open_store(store)
        try:
            a, b = first.agent_ids[0], second.agent_ids[0]
            assert a != b
            blocks_a = {x.id for x in await db.list_blocks(a)}
            blocks_b = {x.id for x in await db.list_blocks(b)}
            assert blocks_a and not blocks_a & blocks_b
            context_a = (await db.get_agent(a)).in_context_message_ids
            context_b = (await db.get_agent(b)).in_context_message_ids
            assert not set(context_a) & set(context_b)
        finally:
            await db.close()

    asyncio.run(go())


def test_blocks_shared_between_agents_of_a_file_stay_shared_and_labels_may_hold_slashes(
        tmp_path: Path) -> None:
    data = minimal_file()
    data["blocks"][0]["label"] = "projects/stateloop"
    data["blocks"][0]["read_only"] = True
    second = {**data["agents"][0], "id": "agent-1", "name": "other",
              "messages": [message("message-1", "system", "x")],
              "in_context_message_ids": ["message-1"]}
    data["agents"].append(second)
    store = _store(tmp_path)

    async def go() -> None:
        result = await import_agents(data, store=store)
        db = await open_store(store)
        try:
            one = await db.list_blocks(result.agent_ids[0])
            two = await db.list_blocks(result.agent_ids[1])
            assert [b.id for b in one] == [b.id for b in two]
            assert one[0].label == "projects/stateloop" and one[0].read_only
            assert one[0].limit == 5000 and one[0].description == "who they are"
            exported = await export_agents(result.agent_ids, store=store)
            assert len(exported["blocks"]) == 1
            assert [a["block_ids"] for a in exported["agents"]] == [["block-0"], ["block-0"]]
        finally:
            await db.close()

    asyncio.run(go())


def test_an_unanswered_call_is_answered_as_interrupted_and_an_approval_request_waits(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    crashed = minimal_file(
        messages=[message("message-0", "system", "S"), message("message-1", "user", "hi"),
                  message("message-2", "assistant", tool_calls=[
                      tool_call("call-1", "send_message", message="a"),
                      tool_call("call-2", "send_message", message="b")]),
                  message("message-3", "tool", "ok", tool_call_id="call-2",
                          tool_returns=[{"tool_call_id": "call-2", "status": "success"}])],
        in_context_message_ids=["message-0", "message-1", "message-2", "message-3"])
    agent = Agent.import_file(crashed, store=store, model=ScriptedModel([reply("hello")]))
    assert [m.role for m in agent.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert [m.tool_call_id for m in agent.messages[3:]] == ["call-1", "call-2"]
    assert agent.messages[3].is_error and "interrupted" in agent.messages[3].text
    assert_transcript_valid(agent.messages)

    waiting = minimal_file(
        messages=[message("message-0", "system", "S"), message("message-1", "user", "hi"),
                  message("message-2", "approval", tool_calls=[
                      tool_call("call-9", "send_message", message="a")])],
        in_context_message_ids=["message-0", "message-1", "message-2"],
        tool_rules=[{"type": "requires_approval", "tool_name": "send_message"}])
    agent = Agent.import_file(waiting, store=store, model=ScriptedModel([reply("hello")]))
    assert agent.pending_approval is not None
    assert agent.pending_approval.requested == ["call-9"]
    exported = agent.export_file()
    assert exported["agents"][0]["messages"][-1]["role"] == "approval"


def test_tool_variables_are_left_out_of_an_export_unless_asked_and_filled_on_import(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    data = minimal_file(tool_exec_environment_variables={"API_KEY": "from-file"})

    async def go() -> None:
        result = await import_agents(data, store=store, options=ImportOptions(
            secrets={"API_KEY": "given"}))
        plain = await export_agents(result.agent_ids, store=store)
        assert plain["agents"][0]["tool_exec_environment_variables"] == {"API_KEY": ""}
        full = await export_agents(result.agent_ids, store=store, include_secrets=True)
        assert full["agents"][0]["tool_exec_environment_variables"] == {"API_KEY": "given"}

    asyncio.run(go())


def test_an_unknown_model_is_kept_and_reported(tmp_path: Path) -> None:
    store = _store(tmp_path)
    data = minimal_file(llm_config={"model": "gemini-1.5-pro", "handle": "google_ai/gemini-1.5-pro",
                                    "model_endpoint_type": "google_ai", "context_window": 1000})

    async def go() -> None:
        result = await import_agents(data, store=store)
        assert any("google_ai/gemini-1.5-pro" in note for note in result.notes), result.notes
        db = await open_store(store)
        try:
            assert (await db.get_agent(result.agent_ids[0])).model == "google_ai/gemini-1.5-pro"
        finally:
            await db.close()

    asyncio.run(go())


BAD_SOURCE = {"id": "tool-0", "name": "broken", "tool_type": "custom",
              "source_code": "def broken(x: str:\n    return x\n",
              "json_schema": {"name": "broken", "parameters": {"type": "object",
                                                                "properties": {}}}}


@pytest.mark.parametrize("case", ["truncated", "wrong types", "unknown version",
                                  "legacy without a model", "bad tool", "missing message",
                                  "huge"])
def test_a_bad_file_is_refused_naming_the_problem_and_stores_nothing(
        case: str, tmp_path: Path) -> None:
    store = _store(tmp_path)
    source: Any
    expected: str
    if case == "truncated":
        source, expected = json.dumps(minimal_file()).encode()[:-40], "not valid JSON"
    elif case == "wrong types":
        source, expected = minimal_file(block_ids="block-0"), "agents.0.block_ids"
    elif case == "unknown version":
        source, expected = {"version": "9.9", "agent": {}}, "'9.9'"
    elif case == "legacy without a model":
        source, expected = {"version": "0.6.4", "core_memory": [], "name": "x"}, "model"
    elif case == "bad tool":
        source = {**minimal_file(tool_ids=["tool-0"]), "tools": [BAD_SOURCE]}
        expected = "'broken'"
    elif case == "missing message":
        source, expected = minimal_file(in_context_message_ids=["message-7"]), "message-7"
    else:
        source = tmp_path / "huge.af"
        with source.open("wb") as handle:  # 100 MB, sparse
            handle.truncate(100 * 1024 * 1024)
        expected = "100.0 MB"
    with pytest.raises(AgentFileError, match=expected.replace(".", r"\.")):
        Agent.import_file(source, store=store, model=ScriptedModel([]), strict=True)
    assert _count(store) == 0


def _stored_rows(store: str) -> tuple[int, int, int]:
    """How many agents, blocks and tools the store holds."""
    async def go() -> tuple[int, int, int]:
        db = await open_store(store)
        try:
            return (len(await db.list_agents()), len(await db.list_blocks()),
                    len(await db.list_tools()))
        finally:
            await db.close()

    return asyncio.run(go())


@pytest.mark.parametrize(("field", "body"), bad_cases(),
                         ids=[f"{field}-{index}" for index, (field, _) in
                              enumerate(bad_cases())])
@pytest.mark.parametrize("given", ["bytes", "path", "dict"])
def test_a_value_the_json_routes_refuse_is_refused_by_the_library_naming_its_field(
        field: str, body: bytes, given: str, tmp_path: Path) -> None:
    store = _store(tmp_path)
    Agent(ScriptedModel([]), store=store, name="kept")
    before = _stored_rows(store)
    source: Any = body
    if given == "path":
        source = tmp_path / "bad.af"
        source.write_bytes(body)
    elif given == "dict":
        source = json.loads(body)  # Python's json reads NaN, 1e400 and lone surrogates
    with pytest.raises(AgentFileError) as raised:
        asyncio.run(import_agents(source, store=store))
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")
    assert _stored_rows(store) == before


@pytest.mark.parametrize("option", ["name", "model"])
def test_an_option_replacing_the_files_value_meets_the_same_rules(option: str,
                                                                  tmp_path: Path) -> None:
    store = _store(tmp_path)
    options = ImportOptions(**{option: "a lone \ud800 surrogate"})
    with pytest.raises(AgentFileError) as raised:
        asyncio.run(import_agents(minimal_file(), store=store, options=options))
    assert raised.value.field == option
    assert _stored_rows(store) == (0, 0, 0)


@pytest.mark.parametrize("limit", ["context_window", "max_tokens"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2**70, 0, -1, 1.5, "big"])
def test_an_agent_takes_only_a_positive_64_bit_window_and_output_limit(limit: str,
                                                                      value: object) -> None:
    with pytest.raises(ConfigError, match=f"^{limit} must be a positive integer"):
        Agent(ScriptedModel([]), **{limit: value})  # type: ignore[arg-type]
    assert getattr(Agent(ScriptedModel([]), **{limit: 4096}), limit) == 4096


def test_a_tool_that_does_not_compile_is_left_out_naming_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    data = {**minimal_file(tool_ids=["tool-0"]), "tools": [BAD_SOURCE]}

    async def go() -> None:
        result = await import_agents(data, store=store, options=ImportOptions())
        assert result.skipped_tools == ["broken"]
        assert result.notes == ["tool 'broken' left out: source_code does not compile: "
                                "line 1: invalid syntax"]
        db = await open_store(store)
        try:
            assert "broken" not in (await db.get_agent(result.agent_ids[0])).tool_names
        finally:
            await db.close()

    asyncio.run(go())


def test_a_tool_whose_hints_cannot_be_resolved_imports_with_the_files_schema(
        tmp_path: Path) -> None:
    source = ("def count(items: List[str]) -> int:\n    \"\"\"Count.\"\"\"\n"
              "    return len(items)\n")
    schema = {"name": "count", "description": "Count.", "parameters": {
        "type": "object", "properties": {"items": {"type": "array", "items": {
            "type": "string"}}}, "required": ["items"]}}
    data = {**minimal_file(tool_ids=["tool-0"]),
            "tools": [{"id": "tool-0", "name": "count", "source_code": source,
                       "json_schema": schema, "tool_type": "custom"}]}
    model = ScriptedModel([call("count", items=["a", "b"]), reply("two")])
    agent = Agent.import_file(data, store=_store(tmp_path), model=model)
    assert agent.tools["count"].parameters == schema["parameters"]
    result = agent.run_sync("count")
    assert [m.text for m in result.messages if m.role == "tool"] == ["2"]


def test_a_legacy_single_agent_file_is_read(tmp_path: Path) -> None:
    legacy = {  # Letta's format of versions 0.6 to 0.10, which Letta 0.16.8 no longer reads
        "version": "0.6.47", "name": "old", "agent_type": "memgpt_agent", "system": "Old.",
        "description": None, "metadata_": {"k": "v"}, "multi_agent_group": None,
        "message_buffer_autoclear": False, "tags": [{"tag": "legacy"}],
        "llm_config": {"model": "gpt-4o-mini", "model_endpoint_type": "openai",
                       "context_window": 16000},
        "embedding_config": {"embedding_model": "text-embedding-3-small"},
        "core_memory": [{"label": "persona", "value": "I am old.", "limit": 5000,
                         "description": None, "is_template": False, "template_name": None,
                         "metadata_": {}}],
        "tools": [], "tool_rules": [{"tool_name": "send_message", "type": "exit_loop"}],
        "tool_exec_environment_variables": [{"key": "TOKEN", "value": "t"}],
        "messages": [{**message("", "system", "Old."), "tool_calls": [], "tool_returns": []},
                     {**message("", "user", "hello"), "tool_calls": [], "tool_returns": []},
                     {**message("", "assistant", "thinking"), "tool_returns": [],
                      "tool_calls": [tool_call("c1", "send_message", message="hi")]},
                     {**message("", "tool", "OK"), "tool_call_id": "c1", "tool_calls": [],
                      "tool_returns": []}],
        "in_context_message_indices": [0, 1, 2, 3]}
    agent = Agent.import_file(json.dumps(legacy).encode(), store=_store(tmp_path),
                              model=ScriptedModel([]))
    assert (agent.name, agent.agent_type.name, agent.tags) == ("old", "memgpt_agent",
                                                                ["legacy"])
    assert [b.label for b in agent.blocks] == ["persona"]
    assert [m.role for m in agent.messages] == ["system", "user", "assistant", "tool"]
    assert agent.messages[3].tool_call_id == "c1"
    assert agent.export_file()["agents"][0]["tool_exec_environment_variables"] == {
        "TOKEN": ""}
