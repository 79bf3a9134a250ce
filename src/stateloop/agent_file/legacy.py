"""Letta's legacy Agent File (``version`` 0.6 to 0.10: one agent, its blocks as
``core_memory``, its tools inline, the context as ``in_context_message_indices``), read as
the current format so one importer serves both. Letta 0.16.8 itself refuses these files."""

from __future__ import annotations

from typing import Any

from .errors import AgentFileError


def is_legacy(data: dict[str, Any]) -> bool:
    return "agents" not in data and "version" in data and "core_memory" in data


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """The legacy file as a current one (file ids ``block-N``, ``tool-N``, ``message-N``)."""
    version = data.get("version")
    blocks = [{**_object(b, f"core_memory.{i}"), "id": f"block-{i}",
               "metadata": b.get("metadata_") or {}}
              for i, b in enumerate(_list(data, "core_memory"))]
    tools = [{**_object(t, f"tools.{i}"), "id": f"tool-{i}"}
             for i, t in enumerate(_list(data, "tools"))]
    messages = [{**_object(m, f"messages.{i}"), "id": f"message-{i}"}
                for i, m in enumerate(_list(data, "messages"))]
    context = []
    for index, position in enumerate(_list(data, "in_context_message_indices")):
        if not isinstance(position, int) or not 0 <= position < len(messages):
            raise AgentFileError(f"{position!r} is not the index of a message (version "
                                 f"{version!r})", field=f"in_context_message_indices.{index}")
        context.append(f"message-{position}")
    variables = {v.get("key"): v.get("value")
                 for v in _list(data, "tool_exec_environment_variables") if isinstance(v, dict)}
    agent = {
        "id": "agent-0", "name": data.get("name"), "agent_type": data.get("agent_type"),
        "system": data.get("system"), "description": data.get("description"),
        "llm_config": data.get("llm_config"), "embedding_config": data.get("embedding_config"),
        "message_buffer_autoclear": data.get("message_buffer_autoclear"),
        "tool_rules": data.get("tool_rules"), "metadata": data.get("metadata_"),
        "tags": [t.get("tag") if isinstance(t, dict) else t for t in _list(data, "tags")],
        "tool_exec_environment_variables": variables,
        "block_ids": [b["id"] for b in blocks], "tool_ids": [t["id"] for t in tools],
        "messages": messages, "in_context_message_ids": context,
    }
    return {"agents": [agent], "groups": [], "blocks": blocks, "files": [], "sources": [],
            "tools": tools, "mcp_servers": [], "metadata": {"legacy_version": str(version)}}


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise AgentFileError(f"must be a list, not {type(value).__name__}", field=key)
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AgentFileError(f"must be an object, not {type(value).__name__}", field=where)
    return value
