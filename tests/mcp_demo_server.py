"""An MCP server written with the SDK, for the tests: ``python mcp_demo_server.py [http PORT]``.

Its tools add, crash the process, hang, fail, return an image, return structured JSON,
say what the process sees (environment, directory, files) and flood the reply (their names
after ``$MCP_DEMO_PREFIX``, when set). With ``$MCP_DEMO_DEPTH``, one more tool's schema
nests that deep (the SDK writes up to ~250 levels; clients parse up to ~200).
Each start of the process appends ``started`` to the file ``$MCP_DEMO_MARKS``, a hang appends
``hanging`` and, when it is cancelled, ``cancelled``: tests see restarts and cancels there.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent
from pydantic import Field

# A 1x1 transparent PNG.
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()

app = MCPServer("demo")
PREFIX = os.environ.get("MCP_DEMO_PREFIX", "")  # before each tool's name


def mark(what: str) -> None:
    path = os.environ.get("MCP_DEMO_MARKS")
    if path:
        with open(path, "a") as marks:
            marks.write(what + "\n")


@app.tool(name=PREFIX + "add")
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool(name=PREFIX + "secret")
def secret() -> str:
    """The value of the DEMO_SECRET environment variable."""
    return os.environ.get("DEMO_SECRET", "unset")


@app.tool(name=PREFIX + "crash")
def crash() -> str:
    """End the server's process at once."""
    sys.stderr.write("demo server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@app.tool(name=PREFIX + "hang")
async def hang(seconds: float = 30) -> str:
    """Wait ``seconds``."""
    mark("hanging")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        mark("cancelled")
        raise
    return "woke"


@app.tool(name=PREFIX + "refuse")
def refuse(reason: str) -> str:
    """Always fails, saying why."""
    raise ToolError(f"refused: {reason}")


@app.tool(name=PREFIX + "pixel")
def pixel() -> list[ImageContent]:
    """A one-pixel PNG image."""
    return [ImageContent(type="image", data=PIXEL, mime_type="image/png")]


@app.tool(name=PREFIX + "weather")
def weather(city: str) -> dict[str, object]:
    """The weather in ``city``, as structured content."""
    return {"city": city, "celsius": 21}


@app.tool(name=PREFIX + "inspect")
def inspect(paths: list[str]) -> dict[str, Any]:
    """What the process sees: its environment, directory, parent's environment, and which
    of ``paths`` exist."""
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as environ:
            parent = environ.read().decode(errors="replace")
    except OSError as exc:
        parent = f"unreadable: {exc}"
    return {"env": dict(os.environ), "cwd": os.getcwd(), "uid": os.getuid(),
            "parent_environ": parent, "exists": [p for p in paths if os.path.exists(p)]}


@app.tool(name=PREFIX + "flood")
def flood(megabytes: float) -> str:
    """That many megabytes of text."""
    return "x" * int(megabytes * 1_000_000)


if os.environ.get("MCP_DEMO_DEPTH"):
    NESTED: dict[str, Any] = {}
    for _ in range(int(os.environ["MCP_DEMO_DEPTH"])):
        NESTED = {"x": NESTED}

    @app.tool(name=PREFIX + "deep")
    def deep(p: Annotated[dict[str, Any], Field(json_schema_extra={"nested": NESTED})]) -> str:
        """A tool whose schema nests deep."""
        return "deep"


if __name__ == "__main__":
    mark("started")
    if sys.argv[1:2] == ["http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
