"""Offering an agent the tools of its MCP servers, listed on its first run."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError


async def offer_tools(agent: Any) -> None:
    """Add the tools of each of ``agent.mcp_servers`` not listed yet to ``agent.tools``."""
    for server in agent.mcp_servers:
        if id(server) in agent._mcp_listed:
            continue
        for tool in await server.list_tools():
            held = agent.tools.get(tool.name)
            if held is not None and getattr(held, "server", None) is not server:
                raise ConfigError(f"MCP server {server.name!r} offers a tool named "
                                  f"{tool.name!r}, and the agent already has one; leave it "
                                  f"out with allowed_tools=[...]")
            agent.tools[tool.name] = tool
        agent._mcp_listed.add(id(server))
