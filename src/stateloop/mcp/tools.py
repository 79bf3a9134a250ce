"""An MCP server's tools as stateloop tools, and what a call returns as a tool output."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from ..tools.base import Tool
from ..tools.execution import ToolOutput, error_text, format_return
from . import session

if TYPE_CHECKING:
    from mcp.types import CallToolResult
    from mcp.types import Tool as ListedTool

    from .config import MCPTools

EMPTY_RESULT = "Empty response from tool"  # Letta's words for a result with no content


async def list_tools(server: MCPTools) -> list[Tool]:
    """The tools ``server`` offers, filtered by its allow-list, ready to give an agent."""
    listed = await session.list_tools(server)
    return [as_tool(server, found) for found in listed
            if server.allowed_tools is None or found.name in server.allowed_tools]


def as_tool(server: MCPTools, found: ListedTool) -> MCPTool:
    """One MCP tool: its schema is offered as the server gives it, and the server checks
    the arguments (it knows its own schema best)."""

    async def run(**arguments: Any) -> ToolOutput:
        return await call_tool(server, found.name, arguments)

    schema = dict(found.input_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return MCPTool(server, found.name, found.description or "", schema, run,
                   timeout=server.timeout, return_char_limit=server.return_char_limit)


class MCPTool(Tool):
    """A tool that runs on an MCP server; ``server`` says which."""

    __slots__ = ("server",)

    def __init__(self, server: MCPTools, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server = server


async def call_tool(server: MCPTools, name: str, arguments: dict[str, Any]) -> ToolOutput:
    """Call ``name`` on ``server``; protocol errors and lost connections become error outputs."""
    from mcp import MCPError  # lazy: the MCP SDK loads on first use

    try:
        result = await session.call_tool(server, name, arguments)
    except session.MCPConnectionError as exc:
        return ToolOutput(error_text(name, "MCPConnectionError", str(exc)), True)
    except MCPError as exc:
        return ToolOutput(error_text(name, "MCPError", exc.message), True)
    return as_output(result)


def as_output(result: CallToolResult) -> ToolOutput:
    """Text as given; structured content as JSON when there is no text; images and other
    media as a note in the text, their data kept in the message's metadata."""
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    for piece in result.content:
        kind = piece.type
        if kind == "text":
            texts.append(piece.text)  # type: ignore[union-attr]
        elif kind in ("image", "audio"):
            mime = piece.mime_type  # type: ignore[union-attr]
            data = piece.data  # type: ignore[union-attr]
            media.append({"type": kind, "media_type": mime, "data": data})
            texts.append(f"[{kind}: {mime}, {_decoded_size(data)} bytes]")
        elif kind == "resource":
            resource = piece.resource  # type: ignore[union-attr]
            texts.append(getattr(resource, "text", None) or f"[resource: {resource.uri}]")
        else:  # a resource link
            texts.append(f"[resource link: {getattr(piece, 'uri', '')}]")
    if not texts and result.structured_content is not None:
        texts.append(format_return(result.structured_content))
    text = "\n".join(texts) or EMPTY_RESULT
    metadata: dict[str, Any] = {}
    if media:
        metadata["media"] = media
    if result.structured_content is not None:
        metadata["structured_content"] = result.structured_content
    return ToolOutput(text, bool(result.is_error), metadata=metadata or None)


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return len(data)
