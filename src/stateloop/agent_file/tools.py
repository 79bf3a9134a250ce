"""An Agent File's tools, checked before anything is stored: built-in tools by name, tools
with source compiled (never run) with the file's JSON schema kept as the truth, and tools
stateloop cannot run (no source, not built in: MCP, files, web) reported and left out."""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Any

from ..errors import ToolDefinitionError
from ..store.records import ToolRecord
from ..tools import Tool
from ..tools.builtin import builtin_names, builtin_tool_type
from ..tools.sandbox import check_source, describe_source
from .reading import AgentFileError, LeftOut

RETURN_CHAR_LIMIT = 50_000  # Letta's default
MAX_SOURCE_BYTES = 1_000_000  # of one tool's source, as the server's default allows


@dataclass(slots=True)
class FileTools:
    names: dict[str, str] = field(default_factory=dict)  # file id -> tool name (kept ones)
    records: list[ToolRecord] = field(default_factory=list)  # tools with source, to store
    skipped: list[str] = field(default_factory=list)  # names of the tools left out


def read_tools(entries: list[dict[str, Any]], left_out: LeftOut) -> FileTools:
    """The file's tools. One stateloop cannot take (no name, a source that does not
    compile, no source and not built in) is left out naming it, or refuses the file when
    ``left_out`` is strict."""
    found = FileTools()
    builtins = set(builtin_names())
    for index, entry in enumerate(entries):
        where = f"tools.{index}"
        name = entry.get("name")
        file_id = entry.get("id")
        if not isinstance(name, str) or not name or not isinstance(file_id, str):
            left_out.skip(where, AgentFileError("a tool has a name and an id", field=where))
            continue
        source = entry.get("source_code")
        if name in builtins and (not source or str(entry.get("tool_type", "")).startswith(
                "letta")):
            found.names[file_id] = name  # Letta's own tools: stateloop's of the same name
            continue
        try:
            if not source:
                raise ToolDefinitionError(f"it is {entry.get('tool_type') or 'custom'}, has no "
                                          "source and is not built into stateloop")
            if not isinstance(source, str):
                raise ToolDefinitionError("source_code must be a string")
            record = _record(entry, name, source)
        except ToolDefinitionError as exc:
            found.skipped.append(name)
            left_out.skip(f"tool {name!r}", AgentFileError(str(exc),
                                                           field=f"{where}.source_code"))
            continue
        found.names[file_id] = name
        found.records.append(record)
    return found


def _record(entry: dict[str, Any], name: str, source: str) -> ToolRecord:
    size = len(source.encode())
    if size > MAX_SOURCE_BYTES:  # as the REST routes refuse it (STATELOOP_TOOL_SOURCE_BYTES)
        raise ToolDefinitionError(f"source_code is {size} bytes, more than the "
                                  f"{MAX_SOURCE_BYTES} a tool's source may have")
    try:
        check_source(source, name)  # compiles, and defines the function the schema names
    except (RecursionError, MemoryError):
        raise ToolDefinitionError("source_code nests too deeply to compile") from None
    schema = entry.get("json_schema")
    if not isinstance(schema, dict) or not isinstance(schema.get("parameters", {}), dict):
        schema = describe_source(source, name, entry.get("args_json_schema"))
    schema = {**schema, "name": name}  # the file's schema is the truth: hints are not read
    limit = entry.get("return_char_limit")
    return ToolRecord(
        name=name, json_schema=schema, description=entry.get("description"),
        tool_type="custom", source_type=entry.get("source_type") or "python",
        source_code=source, binding="sandbox", args_json_schema=entry.get("args_json_schema"),
        return_char_limit=limit if isinstance(limit, int) else RETURN_CHAR_LIMIT,
        default_requires_approval=entry.get("default_requires_approval"),
        enable_parallel_execution=entry.get("enable_parallel_execution"),
        tags=[t for t in entry.get("tags") or [] if isinstance(t, str)],
        pip_requirements=entry.get("pip_requirements"),
        npm_requirements=entry.get("npm_requirements"),
        metadata=entry.get("metadata_") or {})


def live_record(tool: Tool) -> ToolRecord:
    """A record for a tool of a live agent: a Python function's source, when it has one."""
    if tool.name in builtin_names():
        return ToolRecord(tool.name, tool.spec().to_dict(), description=tool.description,
                          tool_type=builtin_tool_type(tool.name), binding=f"builtin:{tool.name}")
    source = None
    if tool.function is not None:
        try:
            source = textwrap.dedent(inspect.getsource(tool.function))
        except (OSError, TypeError):
            source = None
        if source is not None:  # the decorator line is not part of the function
            lines = source.splitlines(keepends=True)
            source = "".join(line for line in lines if not line.startswith("@"))
    return ToolRecord(tool.name, tool.spec().to_dict(), description=tool.description,
                      source_code=source, binding="sandbox" if source else f"python:{tool.name}",
                      return_char_limit=tool.return_char_limit)


def tool_entry(record: ToolRecord, file_id: str) -> dict[str, Any]:
    """A tool as Letta's ``ToolSchema`` holds it."""
    builtin = bool(record.binding and record.binding.startswith("builtin:"))
    return {
        "id": file_id, "tool_type": builtin_tool_type(record.name) if builtin else record.tool_type,
        "description": record.description, "source_type": record.source_type or "python",
        "name": record.name, "tags": list(record.tags), "source_code": record.source_code,
        "json_schema": record.json_schema, "args_json_schema": record.args_json_schema,
        "return_char_limit": record.return_char_limit or RETURN_CHAR_LIMIT,
        "pip_requirements": record.pip_requirements,
        "npm_requirements": record.npm_requirements,
        "default_requires_approval": record.default_requires_approval,
        "enable_parallel_execution": record.enable_parallel_execution,
        "created_by_id": None, "last_updated_by_id": None, "metadata_": record.metadata or {},
    }
