"""``MCPTools``: where an MCP server is, which of its tools to offer, how long a call may take."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .session import close
from .tools import call_tool, list_tools

if TYPE_CHECKING:
    from ..tools.base import Tool
    from ..tools.execution import ToolOutput
    from ..tools.sandbox import Isolation

DEFAULT_CALL_TIMEOUT = 60.0


@dataclass(frozen=True, eq=False)
class MCPTools:
    """One MCP server as a source of tools. Build it with ``MCPTools.stdio`` or ``.http``.

    ``allowed_tools`` (an allow-list of tool names) limits what the agent is offered;
    ``timeout`` bounds each call in seconds. Servers with the same connection settings
    share one session per process.

    What a server may do is bounded by three more settings (a program's own servers
    need none of them; a server that others describe, over REST, gets all three):
    ``isolation`` runs a stdio server in the tools' bubblewrap sandbox, with that
    environment; ``public_only`` refuses HTTP servers at loopback, private and link-local
    addresses; ``max_message_bytes`` bounds each message (or HTTP response) from it."""

    transport: Literal["stdio", "http", "sse"]
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    allowed_tools: frozenset[str] | None = None
    timeout: float | None = DEFAULT_CALL_TIMEOUT
    isolation: Isolation | None = None
    public_only: bool = False
    max_message_bytes: int | None = None
    return_char_limit: int | None = None  # a longer tool result is cut, with a note

    @classmethod
    def stdio(cls, command: str, args: Iterable[str] = (), env: Mapping[str, str] | None = None,
              *, name: str | None = None, allowed_tools: Iterable[str] | None = None,
              timeout: float | None = DEFAULT_CALL_TIMEOUT) -> MCPTools:
        """A server run as a child process, spoken to over its stdin and stdout."""
        return cls("stdio", name or command, command=command, args=tuple(args),
                   env=dict(env or {}), allowed_tools=_allow(allowed_tools), timeout=timeout)

    @classmethod
    def http(cls, url: str, headers: Mapping[str, str] | None = None, *, name: str | None = None,
             allowed_tools: Iterable[str] | None = None,
             timeout: float | None = DEFAULT_CALL_TIMEOUT) -> MCPTools:
        """A server reached over Streamable HTTP at ``url``."""
        return cls("http", name or url, url=url, headers=dict(headers or {}),
                   allowed_tools=_allow(allowed_tools), timeout=timeout)

    @classmethod
    def sse(cls, url: str, headers: Mapping[str, str] | None = None, *, name: str | None = None,
            allowed_tools: Iterable[str] | None = None,
            timeout: float | None = DEFAULT_CALL_TIMEOUT) -> MCPTools:
        """A server reached over the older HTTP+SSE transport at ``url``."""
        return cls("sse", name or url, url=url, headers=dict(headers or {}),
                   allowed_tools=_allow(allowed_tools), timeout=timeout)

    def key(self) -> tuple[Any, ...]:
        """What identifies the session: the connection, not the filter or the timeout."""
        isolation = self.isolation
        sandbox = None if isolation is None else (
            isolation.bwrap, tuple(sorted(isolation.env.items())), isolation.network,
            isolation.own_uid)
        return (self.transport, self.command, self.args, tuple(sorted(self.env.items())),
                self.url, tuple(sorted(self.headers.items())), sandbox, self.public_only,
                self.max_message_bytes)

    async def list_tools(self) -> list[Tool]:
        """The server's tools (those the allow-list lets through) as stateloop tools."""
        return await list_tools(self)

    async def call(self, tool_name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call one tool on the server; a failure comes back as an error output."""
        return await call_tool(self, tool_name, arguments)

    async def close(self) -> None:
        """Close this server's session (the next use starts a new one)."""
        await close(self)

    def __repr__(self) -> str:
        return f"MCPTools.{self.transport}({self.name!r})"


def _allow(names: Iterable[str] | None) -> frozenset[str] | None:
    if names is None:
        return None
    if isinstance(names, str):
        raise TypeError("allowed_tools must be a list of tool names, not a string")
    return frozenset(names)
