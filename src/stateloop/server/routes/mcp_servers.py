"""``/v1/mcp-servers``: MCP servers by id (create, list, retrieve, update, delete), their
tools (list, retrieve, run), refresh and connect. ``/v1/agents/{agent_id}/mcp-servers``:
the same servers as one agent's client sees them (Letta Code lists them every turn): the
registry is the server's, so every agent sees every server.

As in Letta, creating a server lists its tools into the tool registry (``external_mcp``
tools naming the server), best effort: a server that cannot be reached is still stored.
Secrets (``env``, ``auth_token``, ``custom_headers`` values) are stored and read back as
``****``; sent back unchanged, they keep what is stored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, HTTPException, Response
from fastapi.responses import StreamingResponse

from ...mcp import MCPConnectionError
from ...store import ToolRecord
from ...store.mcp_servers import MCPServerRecord
from ..deps import RuntimeDep
from ..models.mcp import (
    FAILED,
    MCP_FAILED,
    MCP_REFUSED,
    CreateMCPServerRequest,
    MCPServerOut,
    ToolExecuteRequest,
    ToolExecutionResult,
    UpdateMCPServerRequest,
)
from ..models.requests import errors, streamed
from ..models.responses import Tool
from ..services import mcp_bridge as bridge
from ..services.runtime import Runtime
from ..services.views import tool_view
from .agents import agent_record
from .tool_ops import ToolSearchRequest, ToolSearchResult, search_tools

router = APIRouter(prefix="/v1/mcp-servers", tags=["mcp-servers"])
agent_router = APIRouter(prefix="/v1/agents/{agent_id}/mcp-servers", tags=["agents"])
logger = logging.getLogger(__name__)


async def create_with_tools(runtime: Runtime, record: MCPServerRecord) -> MCPServerRecord:
    """Store ``record`` (a 403 if the operator does not allow it), then register its tools
    if the server can be reached now; one that cannot is stopped."""
    policy = runtime.mcp_policy()
    await bridge.admit(record, policy)
    stored = await runtime.store.create_mcp_server(record)
    try:
        await bridge.sync_tools(runtime.store, stored, policy)
    except HTTPException as exc:
        logger.warning("MCP server %r stored without its tools: %s", stored.name, exc.detail)
        await closed(runtime, stored)
    return stored


async def closed(runtime: Runtime, record: MCPServerRecord) -> None:
    """End the record's live session (its settings changed, or it is gone)."""
    await bridge.tools_of(record, runtime.mcp_policy()).close()


async def delete_with_tools(runtime: Runtime, record: MCPServerRecord) -> None:
    for tool in await bridge.server_tools(runtime.store, record):
        await runtime.store.delete_tool(tool.name)
    await runtime.store.delete_mcp_server(record.id)
    await closed(runtime, record)


@router.get("/connect/{mcp_server_id}", responses=streamed(404))
async def mcp_connect_mcp_server(mcp_server_id: str, runtime: RuntimeDep) -> StreamingResponse:
    """Connect to the server and stream how it went (Letta's events: ``connection_attempt``,
    then ``success`` with the tools, or ``error``). OAuth is not offered."""
    record = await runtime.store.get_mcp_server(mcp_server_id)

    async def events() -> AsyncIterator[str]:
        yield _event({"event": "connection_attempt", "server_name": record.name})
        try:
            listed = await bridge.listed_tools(record, runtime.mcp_policy())
        except HTTPException as exc:
            yield _event({"event": "error", "message": str(exc.detail)})
            return
        yield _event({"event": "success", "tools": [
            found.model_dump(mode="json", by_alias=True, exclude_none=True) for found in listed]})

    return StreamingResponse(events(), media_type="text/event-stream")


def _event(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"


@router.post("", responses={**errors(409), **MCP_REFUSED}, response_model=MCPServerOut)
async def mcp_create_mcp_server(body: CreateMCPServerRequest,
                                runtime: RuntimeDep) -> dict[str, Any]:
    """Register an MCP server (stdio, SSE or Streamable HTTP) and list its tools."""
    config = body.config
    record = bridge.record_from(body.server_name, config.mcp_server_type,
                                config.model_dump(exclude_none=True))
    return bridge.server_view(await create_with_tools(runtime, record))


@router.get("", response_model=list[MCPServerOut])
async def mcp_list_mcp_servers(runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Every MCP server, oldest first."""
    return [bridge.server_view(found) for found in await runtime.store.list_mcp_servers()]


async def _server(runtime: Runtime, mcp_server_id: str) -> MCPServerRecord:
    record = await runtime.store.get_mcp_server(mcp_server_id)
    if record.id != mcp_server_id:  # found by name: this route takes ids
        raise HTTPException(404, detail=f"no MCP server with id {mcp_server_id!r}")
    return record


@router.get("/{mcp_server_id}", responses=errors(404), response_model=MCPServerOut)
async def mcp_retrieve_mcp_server(mcp_server_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """One MCP server."""
    return bridge.server_view(await _server(runtime, mcp_server_id))


@router.delete("/{mcp_server_id}", status_code=204, responses=errors(404))
async def mcp_delete_mcp_server(mcp_server_id: str, runtime: RuntimeDep) -> Response:
    """Remove the server and its tools; agents that had them answer their calls with an
    error."""
    await delete_with_tools(runtime, await _server(runtime, mcp_server_id))
    return Response(status_code=204)


@router.patch("/{mcp_server_id}", responses={**errors(404, 409), **MCP_REFUSED},
              response_model=MCPServerOut)
async def mcp_update_mcp_server(mcp_server_id: str, body: UpdateMCPServerRequest,
                                runtime: RuntimeDep) -> dict[str, Any]:
    """Change the server's name or settings; its session restarts with them."""
    old = await _server(runtime, mcp_server_id)
    config = body.config
    record = bridge.record_from(body.server_name or old.name, config.mcp_server_type,
                                config.model_dump(exclude_none=True), old)
    await bridge.admit(record, runtime.mcp_policy())
    stored = await runtime.store.update_mcp_server(record)
    await closed(runtime, old)
    return bridge.server_view(stored)


@router.get("/{mcp_server_id}/tools", responses=errors(404), response_model=list[Tool])
async def mcp_list_tools_for_mcp_server(mcp_server_id: str,
                                        runtime: RuntimeDep) -> list[dict[str, Any]]:
    """The server's tools in the registry (refresh lists them anew)."""
    record = await _server(runtime, mcp_server_id)
    return [tool_view(tool) for tool in await bridge.server_tools(runtime.store, record)]


async def _server_tool(runtime: Runtime, record: MCPServerRecord, tool_id: str) -> ToolRecord:
    for tool in await bridge.server_tools(runtime.store, record):
        if tool_id in (tool.id, tool.name):
            return tool
    raise HTTPException(404, detail=f"MCP server {record.name!r} has no tool {tool_id!r}")


@router.get("/{mcp_server_id}/tools/{tool_id}", responses=errors(404), response_model=Tool)
async def mcp_retrieve_mcp_tool(mcp_server_id: str, tool_id: str,
                                runtime: RuntimeDep) -> dict[str, Any]:
    """One of the server's tools, by id (or name)."""
    record = await _server(runtime, mcp_server_id)
    return tool_view(await _server_tool(runtime, record, tool_id))


@router.post("/{mcp_server_id}/tools/{tool_id}/run", responses=errors(404),
             response_model=ToolExecutionResult)
async def mcp_run_tool(mcp_server_id: str, tool_id: str, runtime: RuntimeDep,
                       body: ToolExecuteRequest | None = None) -> dict[str, Any]:
    """Call the tool with ``args``: ``status`` says whether it failed, ``func_return`` is
    its text (as in Letta; structured content comes as JSON text when there is no text)."""
    record = await _server(runtime, mcp_server_id)
    tool = await _server_tool(runtime, record, tool_id)
    output = await bridge.run_tool(record, tool.name, body.args if body else {},
                                   runtime.mcp_policy())
    return {"status": "error" if output.is_error else "success", "func_return": output.text}


@router.patch("/{mcp_server_id}/refresh",
              responses={**errors(404), **MCP_FAILED, **MCP_REFUSED})
async def mcp_refresh_mcp_server_tools(mcp_server_id: str, runtime: RuntimeDep,
                                       agent_id: str | None = None) -> dict[str, Any]:
    """List the server's tools anew: new ones are added, changed ones updated, gone ones
    deleted (Letta's summary of which)."""
    if agent_id is not None:
        await agent_record(runtime, agent_id)
    record = await _server(runtime, mcp_server_id)
    try:
        return await bridge.sync_tools(runtime.store, record, runtime.mcp_policy())
    except MCPConnectionError as exc:
        raise HTTPException(FAILED, detail=str(exc)) from exc


@agent_router.get("", responses=errors(404), response_model=list[MCPServerOut])
async def list_agent_mcp_servers(agent_id: str, runtime: RuntimeDep) -> list[dict[str, Any]]:
    """The MCP servers the agent's client may use: every registered one, secrets as
    ``****``."""
    await agent_record(runtime, agent_id)
    return await mcp_list_mcp_servers(runtime)


@agent_router.post("/tools/search", responses=errors(404),
                   response_model=list[ToolSearchResult])
async def search_agent_mcp_tools(agent_id: str, body: ToolSearchRequest,
                                 runtime: RuntimeDep) -> list[dict[str, Any]]:
    """The MCP servers' tools matching ``query``, best first, ranked as
    ``/v1/tools/search`` ranks (lexically, in every ``search_mode``)."""
    await agent_record(runtime, agent_id)
    only_mcp = body.model_copy(update={"tool_types": ["external_mcp"]})
    return await search_tools(only_mcp, runtime)


@agent_router.get("/{mcp_server_id}/tools", responses=errors(404), response_model=list[Tool])
async def list_agent_mcp_tools(agent_id: str, mcp_server_id: str,
                               runtime: RuntimeDep) -> list[dict[str, Any]]:
    """The server's tools, as ``/v1/mcp-servers/{mcp_server_id}/tools`` lists them."""
    await agent_record(runtime, agent_id)
    return await mcp_list_tools_for_mcp_server(mcp_server_id, runtime)


@agent_router.post("/{mcp_server_id}/tools/{tool_id}/run", responses=errors(404),
                   response_model=ToolExecutionResult)
async def run_agent_mcp_tool(agent_id: str, mcp_server_id: str, tool_id: str,
                             runtime: RuntimeDep,
                             body: ToolExecuteRequest | None = None) -> dict[str, Any]:
    """Call one of the server's tools for the agent's client (as
    ``/v1/mcp-servers/{mcp_server_id}/tools/{tool_id}/run`` does)."""
    await agent_record(runtime, agent_id)
    return await mcp_run_tool(mcp_server_id, tool_id, runtime, body)
