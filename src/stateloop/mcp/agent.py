"""Offering an agent the tools of its MCP servers, listed on its first run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..tools import Tool
    from .config import MCPTools


async def offer_tools(servers: Sequence[MCPTools], tools: dict[str, Tool],
                      listed: set[int]) -> None:
    """Add the tools of each of an agent's MCP ``servers`` whose id is not in ``listed`` yet
    to the agent's ``tools``, and note it as listed."""
    for server in servers:
        if id(server) in listed:
            continue
        for tool in await server.list_tools():
            held = tools.get(tool.name)
            if held is not None and getattr(held, "server", None) is not server:
                raise ConfigError(f"MCP server {server.name!r} offers a tool named "
                                  f"{tool.name!r}, and the agent already has one; leave it "
                                  f"out with allowed_tools=[...]")
            tools[tool.name] = tool
        listed.add(id(server))
