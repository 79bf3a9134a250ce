"""Between stored MCP server records and live MCP sessions: records from request bodies,
secrets redacted in views, what the operator lets a server do (``MCPPolicy``), the server's
tools as tool records (``external_mcp``, the record naming the server, as in Letta), and
bound tools for agents' runs."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx2
from fastapi import HTTPException

from ...addresses import DEFAULT_PORTS, RefusedAddress, public_address
from ...mcp import MCPConnectionError, MCPTools, session
from ...mcp.tools import call_tool
from ...store.errors import DuplicateError
from ...store.mcp_servers import MCPServerRecord
from ...store.records import ToolRecord
from ...tools.base import Tool
from ...tools.execution import ToolOutput, truncated
from ...tools.sandbox import Isolation
from ..models.mcp import FAILED, REDACTED, REFUSED
from .agent_fields import unprocessable

if TYPE_CHECKING:
    from mcp.types import Tool as ListedTool

    from ...store import SqlStore

CONFIG_KEYS = ("command", "args", "server_url", "auth_header")
SECRET_KEYS = ("env", "auth_token", "custom_headers")


@dataclasses.dataclass(frozen=True)
class MCPPolicy:
    """What the operator lets a server described over REST do: run one of
    ``stdio_commands`` (in the tools' sandbox, ``bwrap``; ``sandbox_refused`` says why
    there is none), reach private addresses (``private_urls``), with the network for the
    servers named in ``network``; and how much of what it says is kept."""

    stdio_commands: frozenset[str] = frozenset()
    private_urls: bool = False
    bwrap: str | None = "bwrap"
    own_uid: bool | None = None
    network: frozenset[str] = frozenset()
    sandbox_refused: str | None = None
    max_message_bytes: int = 1_000_000
    return_char_limit: int = 50_000


def refusal(record: MCPServerRecord, policy: MCPPolicy) -> str | None:
    """Why the operator does not let this stdio server run (None: it may, or it is not one)."""
    if record.server_type != "stdio":
        return None
    command = record.config.get("command")
    if not policy.stdio_commands:
        return ("stdio MCP servers are off: the server's operator allows them by naming "
                "their commands in STATELOOP_MCP_STDIO_COMMANDS")
    if command not in policy.stdio_commands:
        return (f"the command {command!r} is not one STATELOOP_MCP_STDIO_COMMANDS allows "
                f"for stdio MCP servers")
    return policy.sandbox_refused


async def admit(record: MCPServerRecord, policy: MCPPolicy) -> None:
    """A 403 naming the setting for a server the operator does not allow: a stdio command
    not allowed, or a URL whose host has a loopback, private or link-local address (a name
    that resolves nowhere now is left to fail when it is used)."""
    refused = refusal(record, policy)
    if refused is None and record.server_type != "stdio" and not policy.private_urls:
        try:
            url = urlsplit(record.config["server_url"])
            port = url.port or DEFAULT_PORTS[url.scheme]
        except ValueError as exc:
            raise unprocessable("server_url", exc) from None
        try:
            await public_address(url.hostname or "", port)
        except RefusedAddress as exc:
            refused = (f"server_url: {exc}, which MCP servers may use only when "
                       f"STATELOOP_MCP_PRIVATE_URLS=1 allows it")
        except httpx2.ConnectError:
            pass  # resolves nowhere now: checked again on every connection
    if refused is not None:
        raise HTTPException(REFUSED, detail=refused)


def record_from(name: str, server_type: str, fields: Mapping[str, Any],
                old: MCPServerRecord | None = None) -> MCPServerRecord:
    """A record from a body's fields; on an update, fields left out (or sent back as
    ``REDACTED``) keep their stored values."""
    config = dict(old.config) if old is not None and old.server_type == server_type else {}
    secrets = dict(old.secrets) if old is not None and old.server_type == server_type else {}
    for key in CONFIG_KEYS:
        if fields.get(key) is not None:
            config[key] = fields[key]
    for key in SECRET_KEYS:
        value = fields.get(key)
        if value is not None:
            secrets[key] = _keep(value, secrets.get(key))
    _require(server_type, config)
    record = MCPServerRecord(name=name, server_type=server_type, config=config, secrets=secrets)
    if old is not None:
        record.id, record.created_at = old.id, old.created_at
    return record


def _require(server_type: str, config: dict[str, Any]) -> None:
    needed = ("command",) if server_type == "stdio" else ("server_url",)
    for key in needed:
        if not config.get(key):
            raise unprocessable(f"config.{key}", f"required for a {server_type} server")
    if server_type == "stdio":
        config.setdefault("args", [])


def _keep(value: Any, old: Any) -> Any:
    if value == REDACTED:
        return old
    if isinstance(value, dict):
        previous = old if isinstance(old, dict) else {}
        return {k: previous.get(k, v) if v == REDACTED else v for k, v in value.items()}
    return value


def redacted(secrets: Mapping[str, Any], key: str) -> Any:
    value = secrets.get(key)
    if isinstance(value, dict):
        return {k: REDACTED for k in value}
    return None if value is None else REDACTED


def server_view(record: MCPServerRecord) -> dict[str, Any]:
    """``/v1/mcp-servers``' shape of a server."""
    base = {"id": record.id, "server_name": record.name, "mcp_server_type": record.server_type}
    return base | _fields(record)


def config_view(record: MCPServerRecord) -> dict[str, Any]:
    """``/v1/tools/mcp/servers``' shape of a server."""
    return {"server_name": record.name, "type": record.server_type} | _fields(record)


def _fields(record: MCPServerRecord) -> dict[str, Any]:
    secrets = record.secrets
    if record.server_type == "stdio":
        return {"command": record.config["command"], "args": list(record.config["args"]),
                "env": redacted(secrets, "env")}
    return {"server_url": record.config["server_url"],
            "auth_header": record.config.get("auth_header"),
            "auth_token": redacted(secrets, "auth_token"),
            "custom_headers": redacted(secrets, "custom_headers")}


def tools_of(record: MCPServerRecord, policy: MCPPolicy) -> MCPTools:
    """The record as a library MCP server (secrets in place), bounded by ``policy``: a
    stdio server in the sandbox with its own environment alone, an HTTP one at public
    addresses only (unless allowed), every message and result bounded."""
    secrets = record.secrets
    if record.server_type == "stdio":
        server = MCPTools.stdio(record.config["command"], record.config.get("args", ()),
                                env=secrets.get("env") or {}, name=record.name)
    else:
        headers = dict(secrets.get("custom_headers") or {})
        if secrets.get("auth_token"):
            headers[record.config.get("auth_header") or "Authorization"] = secrets["auth_token"]
        make = MCPTools.sse if record.server_type == "sse" else MCPTools.http
        server = make(record.config["server_url"], headers, name=record.name)
    isolation = (Isolation(bwrap=policy.bwrap, network=record.name in policy.network,
                           own_uid=policy.own_uid) if record.server_type == "stdio" else None)
    return dataclasses.replace(server, isolation=isolation, public_only=not policy.private_urls,
                               max_message_bytes=policy.max_message_bytes,
                               return_char_limit=policy.return_char_limit)


async def listed_tools(record: MCPServerRecord, policy: MCPPolicy) -> list[ListedTool]:
    """The tools the server lists now; a server the operator does not allow is a 403, one
    that cannot be reached a 424."""
    refused = refusal(record, policy)
    if refused is not None:
        raise HTTPException(REFUSED, detail=refused)
    try:
        return await session.list_tools(tools_of(record, policy))
    except MCPConnectionError as exc:
        raise HTTPException(FAILED, detail=str(exc)) from exc
    except Exception as exc:  # the server answered listing with an error
        raise HTTPException(FAILED, detail=f"MCP server {record.name!r}: {exc}") from exc


def tool_record(record: MCPServerRecord, listed: ListedTool) -> ToolRecord:
    """A registry row for one of the server's tools (Letta's ``external_mcp``)."""
    parameters = dict(listed.input_schema or {})
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    return ToolRecord(
        name=listed.name, description=listed.description,
        json_schema={"name": listed.name, "description": listed.description or "",
                     "parameters": parameters},
        tool_type="external_mcp", source_type="python", binding=f"mcp:{record.id}",
        tags=[f"mcp:{record.name}"],
        metadata={"mcp": {"server_name": record.name, "server_id": record.id}})


def server_id_of(tool: ToolRecord) -> str | None:
    """The id of the MCP server a tool record runs on, or None for other tools."""
    if tool.tool_type != "external_mcp":
        return None
    found = (tool.metadata.get("mcp") or {}).get("server_id")
    return found if isinstance(found, str) else None


async def register_tool(store: SqlStore, record: MCPServerRecord, listed: ListedTool
                        ) -> ToolRecord:
    """Add (or refresh) one of the server's tools in the registry; a name another tool
    has is a ``DuplicateError`` (an MCP tool never replaces a tool of another kind)."""
    try:
        held = await store.get_tool(listed.name)
    except LookupError:
        held = None
    if held is not None and server_id_of(held) != record.id:
        raise DuplicateError(f"a tool named {listed.name!r} is already registered; MCP "
                             f"server {record.name!r}'s tool of that name is left out")
    return await store.upsert_tool(tool_record(record, listed))


async def sync_tools(store: SqlStore, record: MCPServerRecord, policy: MCPPolicy
                     ) -> dict[str, list[str]]:
    """Make the registry hold exactly the server's current tools: Letta's resync summary."""
    listed = await listed_tools(record, policy)
    held = {tool.name: tool for tool in await store.list_tools()
            if server_id_of(tool) == record.id}
    result: dict[str, list[str]] = {"deleted": [], "updated": [], "added": []}
    for found in listed:
        try:
            await register_tool(store, record, found)
        except DuplicateError:
            continue
        result["updated" if found.name in held else "added"].append(found.name)
    for name in sorted(set(held) - {found.name for found in listed}):
        await store.delete_tool(name)
        result["deleted"].append(name)
    return result


async def server_tools(store: SqlStore, record: MCPServerRecord) -> list[ToolRecord]:
    """The registry's tools that run on this server."""
    return [tool for tool in await store.list_tools() if server_id_of(tool) == record.id]


async def run_tool(record: MCPServerRecord, name: str, arguments: dict[str, Any],
                   policy: MCPPolicy) -> ToolOutput:
    """One call, bounded by the server's call timeout; its text by the return limit."""
    refused = refusal(record, policy)
    if refused is not None:
        return ToolOutput(f"Tool {name!r}: {refused}.", True)
    server = tools_of(record, policy)
    try:
        async with asyncio.timeout(server.timeout):
            output = await call_tool(server, name, arguments)
    except TimeoutError:
        return ToolOutput(f"Tool {name!r} timed out after {server.timeout:g} s.", True)
    output.text = truncated(output.text, policy.return_char_limit)
    return output


def bound_tool(store: SqlStore, record: ToolRecord, policy: MCPPolicy) -> Tool:
    """A callable ``external_mcp`` tool: each call reads its server's record, so an update
    of the server applies at once, and a deleted server answers with an error."""
    server_id = server_id_of(record) or ""
    parameters = record.json_schema.get("parameters") or {"type": "object", "properties": {}}

    async def run(**arguments: Any) -> ToolOutput:
        try:
            server = await store.get_mcp_server(server_id)
        except LookupError:
            return ToolOutput(f"Tool {record.name!r}: its MCP server {server_id!r} no longer "
                              f"exists.", True)
        refused = refusal(server, policy)
        if refused is not None:
            return ToolOutput(f"Tool {record.name!r}: {refused}.", True)
        return await call_tool(tools_of(server, policy), record.name, arguments)

    return Tool(record.name, record.description or "", parameters, run,
                return_char_limit=record.return_char_limit or policy.return_char_limit)
