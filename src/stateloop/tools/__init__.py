"""Tools: definitions from Python functions, execution, and (``rules``) Letta's tool rules."""

from .base import DEFAULT_TIMEOUT, Tool, ToolContext, tool
from .execution import ToolOutput, execute_tool, format_return

__all__ = ["DEFAULT_TIMEOUT", "Tool", "ToolContext", "ToolOutput", "execute_tool",
           "format_return", "tool"]
