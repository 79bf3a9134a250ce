"""Tools from MCP servers: ``Agent(tools=[MCPTools.stdio(...), MCPTools.http(...)])``.

The official ``mcp`` SDK is imported only when a server is first used, so importing
stateloop stays fast. (This package is ``stateloop.mcp``; inside it ``import mcp`` is the SDK.)
"""

from .config import MCPTools
from .session import MCPConnectionError, close_all

__all__ = ["MCPConnectionError", "MCPTools", "close_all"]
