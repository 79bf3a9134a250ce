"""An exported Agent File is one Letta 0.16.8's importer accepts: it validates against the
``AgentFileSchema`` of Letta's OpenAPI document, and holds no key Letta's models do not
declare (they forbid extra keys)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import jsonschema_rs

from af_support import FIXTURES, message, minimal_file, tool_call
from letta_spec import letta_spec
from stateloop import Agent
from stateloop.agent_file import export_agents, import_agents
from stateloop.testing import ScriptedModel, call, calls, reply

_ENTITIES = {"agents": "letta__schemas__agent_file__AgentSchema", "blocks": "BlockSchema",
             "tools": "letta__schemas__agent_file__ToolSchema", "groups": "GroupSchema"}
_MESSAGE = "letta__schemas__agent_file__MessageSchema"


def assert_letta_accepts(data: dict[str, Any]) -> None:
    components = letta_spec()["components"]
    validator = jsonschema_rs.Draft202012Validator(
        {"$ref": "#/components/schemas/AgentFileSchema", "components": components})
    problems = [f"{list(e.instance_path)}: {e.message}" for e in validator.iter_errors(data)]
    assert not problems, problems[:5]
    schemas = components["schemas"]
    assert set(data) <= set(schemas["AgentFileSchema"]["properties"])
    for kind, name in _ENTITIES.items():
        for entry in data[kind]:
            extra = set(entry) - set(schemas[name]["properties"])
            assert not extra, f"{kind}: keys Letta does not declare: {extra}"
    for agent in data["agents"]:
        for entry in agent["messages"]:
            extra = set(entry) - set(schemas[_MESSAGE]["properties"])
            assert not extra, f"messages: keys Letta does not declare: {extra}"


def test_exports_of_letta_files_after_a_turn_validate(tmp_path: Path) -> None:
    for index, path in enumerate(FIXTURES):
        model = ScriptedModel([calls(call("conversation_search", query="tea"),
                                     call("send_message", message="hi")), reply("done")])
        agent = Agent.import_file(path, store=f"sqlite:///{tmp_path / f'{index}.db'}",
                                  model=model, tools=["conversation_search", "send_message"])
        agent.run_sync("hello")
        assert_letta_accepts(agent.export_file())


def test_exports_with_parallel_calls_approvals_reasoning_and_groups_validate(
        tmp_path: Path) -> None:
    data = minimal_file(
        messages=[message("message-0", "system", "S"), message("message-1", "user", "hi"),
                  {**message("message-2", "assistant", "thinking aloud"),
                   "content": [{"type": "reasoning", "reasoning": "hmm", "signature": "s"},
                               {"type": "text", "text": "two calls"}],
                   "tool_calls": [tool_call("c1", "send_message", message="a"),
                                  tool_call("c2", "send_message", message="b")]},
                  message("message-3", "tool", "", tool_returns=[
                      {"tool_call_id": "c1", "status": "success", "func_response": "ok"},
                      {"tool_call_id": "c2", "status": "error", "func_response": "no"}]),
                  message("message-4", "approval", tool_calls=[
                      tool_call("c3", "send_message", message="c")])],
        in_context_message_ids=[f"message-{i}" for i in range(5)],
        tool_rules=[{"type": "requires_approval", "tool_name": "send_message"}])
    second = {**data["agents"][0], "id": "agent-1", "name": "member",
              "messages": [message("m-1", "system", "x")], "in_context_message_ids": ["m-1"]}
    data["agents"].append(second)
    data["groups"] = [{"id": "group-0", "agent_ids": ["agent-1"], "description": "",
                       "manager_config": {"manager_type": "supervisor",
                                          "manager_agent_id": "agent-0"}}]
    store = f"sqlite:///{tmp_path / 'rich.db'}"

    async def go() -> dict[str, Any]:
        result = await import_agents(data, store=store)
        return await export_agents(result.agent_ids[:1], store=store)

    exported = asyncio.run(go())
    assert_letta_accepts(exported)
    roles = [m["role"] for m in exported["agents"][0]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "approval"]
    assert exported["groups"][0]["agent_ids"] == ["agent-1"]
