"""What the Agent File tests share: the fixtures, a file's ids normalised, small files."""

from __future__ import annotations

import copy
import json
from typing import Any

from shared_fixtures import LETTA_AF

FIXTURES = sorted(LETTA_AF.glob("*.af"))


def normalised(data: dict[str, Any]) -> str:
    """The file as text, without what differs between two exports of the same agents (the
    moment it was written)."""
    data = copy.deepcopy(data)
    data["created_at"] = None
    return json.dumps(data, indent=2, sort_keys=True)


def minimal_file(**agent: Any) -> dict[str, Any]:
    """A small Agent File in Letta's format: one agent, one block; ``agent`` overrides."""
    entry = {"name": "small", "id": "agent-0", "agent_type": "letta_v1_agent",
             "system": "You are small.", "block_ids": ["block-0"], "tool_ids": [],
             "llm_config": {"model": "gpt-4o-mini", "handle": "openai/gpt-4o-mini",
                            "model_endpoint_type": "openai", "context_window": 32000},
             "embedding_config": {}, "in_context_message_ids": ["message-0"],
             "messages": [message("message-0", "system", "You are small.")]}
    entry.update(agent)
    return {"agents": [entry], "groups": [], "files": [], "sources": [], "mcp_servers": [],
            "blocks": [{"id": "block-0", "label": "human", "value": "Ada", "limit": 5000,
                        "description": "who they are", "read_only": False}],
            "tools": [], "metadata": {"revision_id": "b1c2d3e4f5a6"}}


def message(file_id: str, role: str, text: str = "", **fields: Any) -> dict[str, Any]:
    return {"id": file_id, "role": role, "created_at": "2025-11-21T03:05:34.027937+00:00",
            "content": [{"type": "text", "text": text}] if text else [], **fields}


def tool_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


SHOUT = {"id": "tool-0", "name": "shout", "tool_type": "custom",
         "source_code": 'def shout(text: str) -> str:\n    """Say it louder."""\n'
                        "    return text.upper()\n",
         "json_schema": {"name": "shout", "description": "Say it louder.",
                         "parameters": {"type": "object",
                                        "properties": {"text": {"type": "string"}},
                                        "required": ["text"]}}}

# Values no way in may store, written as JSON text (``1e400`` reads as infinity), and where
# in a file with a tool (``minimal_file`` with ``SHOUT``) they go.
BAD_NUMBERS = {"1e400": "1e400", "NaN": "NaN", "2**70": str(2**70)}
NUMBER_FIELDS = [("agents", 0, "max_tokens"), ("agents", 0, "context_window_limit"),
                 ("agents", 0, "llm_config", "temperature")]
TEXT_FIELDS = [("agents", 0, "name"), ("agents", 0, "system"), ("tools", 0, "source_code")]


def file_with(path: tuple[str | int, ...], literal: str) -> bytes:
    """A small file holding a tool, with the JSON text ``literal`` at ``path``."""
    data: Any = {**minimal_file(tool_ids=["tool-0"]), "tools": [copy.deepcopy(SHOUT)]}
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = "\0marker\0"
    return json.dumps(data).replace('"\\u0000marker\\u0000"', literal).encode()


def bad_cases() -> list[tuple[str, bytes]]:
    """(the field's path, the file) for each bad value in each field."""
    cases = [(".".join(map(str, path)), file_with(path, literal))
             for path in NUMBER_FIELDS for literal in BAD_NUMBERS.values()]
    cases += [(".".join(map(str, path)), file_with(path, '"a lone \\ud800 surrogate"'))
              for path in TEXT_FIELDS]
    return cases


def letta_fixture(name: str) -> dict[str, Any]:
    """One of Letta's exported files, parsed (they are stored double-encoded)."""
    data = json.loads((LETTA_AF / name).read_text())
    return json.loads(data) if isinstance(data, str) else data


OVER_LIMIT = 28_927  # characters in a block Letta exported with a limit of 10,000


def over_limit_file() -> dict[str, Any]:
    """Letta's MemGPT agent as a public export has it: the persona block's value is longer
    than its limit (28,927 characters, limit 10,000)."""
    data = letta_fixture("memgpt_agent.af")
    [persona] = [b for b in data["blocks"] if b["label"] == "persona"]
    text = persona["value"] + "\n"
    persona["value"] = (text * (OVER_LIMIT // len(text) + 1))[:OVER_LIMIT]
    persona["limit"] = 10_000
    return data


BROKEN_TOOL = {"id": "tool-9", "name": "broken", "tool_type": "custom",
               "source_code": "def broken(x: str:\n    return x\n",
               "json_schema": {"name": "broken", "parameters": {"type": "object",
                                                                 "properties": {}}}}


def file_with_bad_items() -> dict[str, Any]:
    """``over_limit_file`` with what stateloop cannot take added: a tool that does not
    compile, a block without a label, a tool rule of an unknown type, and references to a
    tool and a block the file does not hold."""
    data = over_limit_file()
    agent = data["agents"][0]
    data["tools"].append(copy.deepcopy(BROKEN_TOOL))
    data["blocks"].append({"id": "block-9", "value": "no label", "limit": 100})
    agent["tool_ids"] += ["tool-9", "tool-missing"]
    agent["block_ids"] += ["block-9", "block-missing"]
    agent["tool_rules"] = [*(agent.get("tool_rules") or []),
                           {"type": "no_such_rule", "tool_name": "send_message"}]
    return data
