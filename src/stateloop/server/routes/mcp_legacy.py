"""``/v1/tools/mcp/servers``: Letta's older MCP routes, by server name: list, add, update,
delete, test, connect, resync, a server's live tools, running one, and adding one of its
tools to the registry. The records are those of ``/v1/mcp-servers``; secrets read ``****``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse

from ...store.mcp_servers import MCPServerRecord
from ..deps import RuntimeDep
from ..models.mcp import (
    MCP_FAILED,
    MCP_REFUSED,
    ConfigOut,
    LegacyToolExecuteRequest,
    LegacyUpdate,
    MCPToolOut,
    ServerConfigIn,
)
from ..models.requests import errors, streamed
from ..models.responses import Tool
from ..services import mcp_bridge as bridge
from ..services.runtime import Runtime
from ..services.views import tool_view
from .agents import agent_record
from .mcp_servers import closed, create_with_tools, delete_with_tools

router = APIRouter(prefix="/v1/tools/mcp/servers", tags=["tools"])


def _record(body: ServerConfigIn) -> MCPServerRecord:
    return bridge.record_from(body.server_name, body.type,
                              body.model_dump(exclude_none=True, exclude={"server_name", "type"}))


async def _all(runtime: Runtime) -> list[dict[str, Any]]:
    return [bridge.config_view(found) for found in await runtime.store.list_mcp_servers()]


@router.get("", response_model=dict[str, ConfigOut])
async def list_mcp_servers(runtime: RuntimeDep) -> dict[str, Any]:
    """Every MCP server's config, by name."""
    return {found.name: bridge.config_view(found)
            for found in await runtime.store.list_mcp_servers()}


@router.put("", responses={**errors(409), **MCP_REFUSED}, response_model=list[ConfigOut])
async def add_mcp_server(body: ServerConfigIn, runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Register a server (and its tools, when it can be reached); answers every config."""
    await create_with_tools(runtime, _record(body))
    return await _all(runtime)


@router.post("/test", responses={**MCP_FAILED, **MCP_REFUSED})
async def test_mcp_server(body: ServerConfigIn, runtime: RuntimeDep) -> dict[str, Any]:
    """Connect to a server that is not stored and list its tools."""
    record = _record(body)
    policy = runtime.mcp_policy()
    await bridge.admit(record, policy)
    try:
        listed = await bridge.listed_tools(record, policy)
    finally:
        await closed(runtime, record)
    return {"status": "success", "tools": [_tool_out(found) for found in listed]}


@router.post("/connect", responses={**streamed(), **MCP_REFUSED})
async def connect_mcp_server(body: ServerConfigIn, runtime: RuntimeDep) -> StreamingResponse:
    """``test`` as a stream of Letta's connection events (no OAuth)."""
    record = _record(body)
    policy = runtime.mcp_policy()
    await bridge.admit(record, policy)

    async def events() -> AsyncIterator[str]:
        yield _event({"event": "connection_attempt", "server_name": record.name})
        try:
            listed = await bridge.listed_tools(record, policy)
        except HTTPException as exc:
            yield _event({"event": "error", "message": str(exc.detail)})
            return
        finally:
            await closed(runtime, record)
        yield _event({"event": "success", "tools": [_tool_out(found) for found in listed]})

    return StreamingResponse(events(), media_type="text/event-stream")


def _event(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"


def _tool_out(found: Any) -> dict[str, Any]:
    out: dict[str, Any] = found.model_dump(mode="json", by_alias=True, exclude_none=True)
    out["inputSchema"] = out.pop("inputSchema", None) or out.pop("input_schema", {})
    return out


async def _named(runtime: Runtime, mcp_server_name: str) -> MCPServerRecord:
    record = await runtime.store.get_mcp_server(mcp_server_name)
    if record.name != mcp_server_name:  # found by id: these routes take names
        raise HTTPException(404, detail=f"no MCP server named {mcp_server_name!r}")
    return record


@router.patch("/{mcp_server_name}", responses={**errors(404, 409), **MCP_REFUSED},
              response_model=ConfigOut)
async def update_mcp_server(mcp_server_name: str, body: LegacyUpdate,
                            runtime: RuntimeDep) -> dict[str, Any]:
    """Change a server's name or settings (``stdio_config`` for a stdio server)."""
    old = await _named(runtime, mcp_server_name)
    if old.server_type == "stdio":
        fields = (body.stdio_config.model_dump(exclude_none=True, exclude={"server_name"})
                  if body.stdio_config else {})
    else:
        fields = body.model_dump(exclude_none=True, include={"server_url", "auth_header",
                                                              "auth_token", "custom_headers"})
        if body.token is not None:
            fields["auth_token"] = body.token
    record = bridge.record_from(body.server_name or old.name, old.server_type, fields, old)
    await bridge.admit(record, runtime.mcp_policy())
    stored = await runtime.store.update_mcp_server(record)
    await closed(runtime, old)
    return bridge.config_view(stored)


@router.delete("/{mcp_server_name}", responses=errors(404), response_model=list[ConfigOut])
async def delete_mcp_server(mcp_server_name: str, runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Remove a server and its tools; answers the configs left."""
    await delete_with_tools(runtime, await _named(runtime, mcp_server_name))
    return await _all(runtime)


@router.get("/{mcp_server_name}/tools", responses={**errors(404), **MCP_FAILED, **MCP_REFUSED},
            response_model=list[MCPToolOut])
async def list_mcp_tools_by_server(mcp_server_name: str,
                                   runtime: RuntimeDep) -> list[dict[str, Any]]:
    """The tools the server lists now."""
    record = await _named(runtime, mcp_server_name)
    return [_tool_out(found)
            for found in await bridge.listed_tools(record, runtime.mcp_policy())]


@router.post("/{mcp_server_name}/resync",
             responses={**errors(404), **MCP_FAILED, **MCP_REFUSED})
async def resync_mcp_server_tools(mcp_server_name: str, runtime: RuntimeDep,
                                  agent_id: str | None = None) -> dict[str, Any]:
    """List the server's tools anew into the registry (added, updated, deleted)."""
    if agent_id is not None:
        await agent_record(runtime, agent_id)
    return await bridge.sync_tools(runtime.store, await _named(runtime, mcp_server_name),
                                   runtime.mcp_policy())


@router.post("/{mcp_server_name}/tools/{tool_name}/execute", responses=errors(404))
async def execute_mcp_tool(mcp_server_name: str, tool_name: str,
                           body: LegacyToolExecuteRequest,
                           runtime: RuntimeDep) -> dict[str, Any]:
    """Call one of the server's tools: ``{"result": text, "success": bool}``."""
    record = await _named(runtime, mcp_server_name)
    output = await bridge.run_tool(record, tool_name, body.args, runtime.mcp_policy())
    return {"result": output.text, "success": not output.is_error}


@router.post("/{mcp_server_name}/{mcp_tool_name}",
             responses={**errors(404, 409), **MCP_FAILED, **MCP_REFUSED},
             response_model=Tool)
async def add_mcp_tool(mcp_server_name: str, mcp_tool_name: str,
                       runtime: RuntimeDep) -> dict[str, Any]:
    """Add one of the server's tools to the registry, to attach to agents."""
    record = await _named(runtime, mcp_server_name)
    for found in await bridge.listed_tools(record, runtime.mcp_policy()):
        if found.name == mcp_tool_name:
            return tool_view(await bridge.register_tool(runtime.store, record, found))
    raise HTTPException(404, detail=f"MCP server {mcp_server_name!r} has no tool "
                                    f"{mcp_tool_name!r}")
