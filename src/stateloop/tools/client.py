"""Client-side tools: offered to the model like any other, run by whoever asked for the run.

A call to one pauses the run (stop reason ``requires_approval``) until the caller sends the
tool's result back as an approval that carries it.
"""

from __future__ import annotations

from typing import Any

from .base import Tool


def client_tool(name: str, description: str | None = None,
                parameters: dict[str, Any] | None = None) -> Tool:
    """A tool with no function here, whose every call waits for the caller's result."""
    return Tool(name, description or "", parameters or {"type": "object", "properties": {}},
                None, requires_approval=True)
