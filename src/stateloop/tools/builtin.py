"""Built-in tools, attached by name: ``tools=["send_message", my_tool]``."""

from __future__ import annotations

from .base import Tool, tool


@tool
def send_message(message: str) -> str:
    """Sends a message to the human user.

    Args:
        message: Message contents. All unicode (including emojis) are supported.
    """
    return "Sent message successfully."


BUILTIN_TOOLS: dict[str, Tool] = {t.name: t for t in (send_message,)}
