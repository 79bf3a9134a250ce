"""Open files as a part of an agent's context: putting the ``<directories>`` section of the
system prompt (``memory/directories.py`` renders it from the store) on a live agent when its
folders or open files change."""

from __future__ import annotations

from typing import Any

from ..memory.directories import render, stored_directories

__all__ = ["refresh", "render", "stored_directories"]


async def refresh(agent: Any) -> None:
    """Put the stored section on a live agent; its system prompt recompiles if it changed."""
    if agent.store is None:
        return
    text = await stored_directories(agent.store, agent.id)
    if text != agent.directories:
        agent.directories = text
        agent.memory_changed()
