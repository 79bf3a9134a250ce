"""The demo MCP server of the tests, over stdio or Streamable HTTP on loopback."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from patience import STARTS, STOPS
from stateloop.mcp import MCPTools

DEMO = str(Path(__file__).with_name("mcp_demo_server.py"))


def stdio_demo(marks: Path | None = None, **options) -> MCPTools:
    env = {"DEMO_SECRET": "s3cret"}
    if marks is not None:
        env["MCP_DEMO_MARKS"] = str(marks)
    return MCPTools.stdio(sys.executable, [DEMO], env=env, name="demo", **options)


def demo_command(directory: Path) -> str:
    """The demo server as one executable file in ``directory``: a command an operator can
    allow (``STATELOOP_MCP_STDIO_COMMANDS``), readable in the tools' sandbox."""
    command = directory / "mcp-demo-server"
    command.write_text(f"#!{sys.executable}\n" + Path(DEMO).read_text())
    command.chmod(0o755)
    directory.chmod(0o755)
    return str(command)


# A stdio server that speaks JSON-RPC by hand, to list a tool whose name is a lone surrogate
# (the SDK refuses to write one).
SURROGATE_SERVER = r'''
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))
    elif message["method"] == "tools/list":
        print('{"jsonrpc": "2.0", "id": %s, "result": {"tools": [{"name": "a\\ud800", '
              '"inputSchema": {"type": "object"}}]}}' % json.dumps(message["id"]))
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}))
    sys.stdout.flush()
'''


def surrogate_command(directory: Path) -> str:
    """``SURROGATE_SERVER`` as one executable file in ``directory``."""
    command = directory / "surrogate-mcp-server"
    command.write_text(f"#!{sys.executable}\n" + SURROGATE_SERVER)
    command.chmod(0o755)
    directory.chmod(0o755)
    return str(command)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def http_demo(marks: Path | None = None, **env: str) -> Iterator[str]:
    """The demo server on Streamable HTTP; yields its URL."""
    port = free_port()
    if marks is not None:
        env["MCP_DEMO_MARKS"] = str(marks)
    import os

    process = subprocess.Popen([sys.executable, DEMO, "http", str(port)],
                               env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + STARTS
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the demo MCP server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(STOPS)
