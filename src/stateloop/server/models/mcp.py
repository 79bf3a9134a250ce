"""Letta's MCP shapes: server configs in (both route families' forms) and out, with secrets
shown as ``REDACTED``; the tools an MCP server lists; a tool run's result."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from .requests import ErrorBody, Lenient, Strict, ToolEnv
from .responses import Response

REDACTED = "****"  # what a stored secret reads as; sent back unchanged, it keeps the secret

# An MCP server that cannot be reached, or fails, where it is needed (Letta answers 502).
FAILED = 424
MCP_FAILED: dict[int | str, dict[str, Any]] = {
    FAILED: {"model": ErrorBody, "description": "Failed Dependency: the MCP server failed"}}
# A server the operator does not allow: a stdio command, or a private address.
REFUSED = 403
MCP_REFUSED: dict[int | str, dict[str, Any]] = {
    REFUSED: {"model": ErrorBody, "description": "Forbidden: the operator does not allow "
                                                 "this MCP server (the detail names the setting)"}}

StringMap = dict[str, str]


# -- /v1/mcp-servers: create and update ------------------------------------------------------

class CreateStdioMCPServer(Strict):
    mcp_server_type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str]
    env: ToolEnv = None


class CreateHTTPMCPServer(Strict):
    server_url: str = Field(pattern=r"^https?://")
    auth_header: str | None = None
    auth_token: str | None = None
    custom_headers: StringMap | None = None


class CreateSSEMCPServer(CreateHTTPMCPServer):
    mcp_server_type: Literal["sse"] = "sse"


class CreateStreamableHTTPMCPServer(CreateHTTPMCPServer):
    mcp_server_type: Literal["streamable_http"] = "streamable_http"


class CreateMCPServerRequest(Strict):
    server_name: str = Field(min_length=1)
    config: Annotated[CreateStdioMCPServer | CreateSSEMCPServer | CreateStreamableHTTPMCPServer,
                      Field(discriminator="mcp_server_type")]


class UpdateStdioMCPServer(Strict):
    mcp_server_type: Literal["stdio"] = "stdio"
    command: str | None = Field(default=None, min_length=1)
    args: list[str] | None = None
    env: ToolEnv = None


class UpdateHTTPMCPServer(Strict):
    server_url: str | None = Field(default=None, pattern=r"^https?://")
    auth_header: str | None = None
    auth_token: str | None = None
    custom_headers: StringMap | None = None


class UpdateSSEMCPServer(UpdateHTTPMCPServer):
    mcp_server_type: Literal["sse"] = "sse"


class UpdateStreamableHTTPMCPServer(UpdateHTTPMCPServer):
    mcp_server_type: Literal["streamable_http"] = "streamable_http"


class UpdateMCPServerRequest(Strict):
    server_name: str | None = Field(default=None, min_length=1)
    config: Annotated[UpdateStdioMCPServer | UpdateSSEMCPServer | UpdateStreamableHTTPMCPServer,
                      Field(discriminator="mcp_server_type")]


class ToolExecuteRequest(Strict):
    args: dict[str, Any] = Field(default_factory=dict)


# -- /v1/mcp-servers: answers ----------------------------------------------------------------

class StdioMCPServer(Response):
    mcp_server_type: Literal["stdio"] = "stdio"
    command: str
    args: list[str]
    env: StringMap | None = None
    id: str
    server_name: str


class HTTPMCPServer(Response):
    mcp_server_type: Literal["sse", "streamable_http"]
    server_url: str
    auth_header: str | None = None
    auth_token: str | None = None
    custom_headers: StringMap | None = None
    id: str
    server_name: str


MCPServerOut = StdioMCPServer | HTTPMCPServer


class ToolExecutionResult(Response):
    status: Literal["success", "error"]
    func_return: Any = None
    stdout: list[str] | None = None
    stderr: list[str] | None = None


# -- /v1/tools/mcp/servers (the older family) ------------------------------------------------

class StdioServerConfig(Lenient):
    server_name: str = Field(min_length=1)
    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str]
    env: ToolEnv = None


class HTTPServerConfig(Lenient):
    server_name: str = Field(min_length=1)
    server_url: str = Field(pattern=r"^https?://")
    auth_header: str | None = None
    auth_token: str | None = None
    custom_headers: StringMap | None = None


class SSEServerConfig(HTTPServerConfig):
    type: Literal["sse"] = "sse"


class StreamableHTTPServerConfig(HTTPServerConfig):
    type: Literal["streamable_http"] = "streamable_http"


ServerConfigIn = StdioServerConfig | StreamableHTTPServerConfig | SSEServerConfig


class LegacyUpdate(Strict):
    """Letta's three update forms in one: ``stdio_config`` for a stdio server, the URL,
    header and token fields for the others."""

    server_name: str | None = Field(default=None, min_length=1)
    stdio_config: StdioServerConfig | None = None
    server_url: str | None = Field(default=None, pattern=r"^https?://")
    auth_header: str | None = None
    auth_token: str | None = None
    custom_headers: StringMap | None = None
    token: str | None = None  # the SSE form's name for the token


class LegacyToolExecuteRequest(Lenient):
    args: dict[str, Any] = Field(default_factory=dict)


class StdioConfigOut(Response):
    server_name: str
    type: Literal["stdio"] = "stdio"
    command: str
    args: list[str]
    env: StringMap | None = None


class HTTPConfigOut(Response):
    server_name: str
    type: Literal["sse", "streamable_http"]
    server_url: str
    auth_header: str | None = None
    auth_token: str | None = None
    custom_headers: StringMap | None = None


ConfigOut = StdioConfigOut | HTTPConfigOut


class MCPToolOut(Response):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    title: str | None = None
    description: str | None = None
    inputSchema: dict[str, Any]  # MCP's own field names
    outputSchema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")
