"""The tools and the agent maker that the loop's tests share."""

from __future__ import annotations

from stateloop import Agent, tool
from stateloop.testing import ScriptedModel


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def fail(reason: str) -> str:
    """Always raises."""
    raise ValueError(f"cannot do {reason}")


def agent_with(script, **options) -> Agent:
    options.setdefault("tools", [add, fail])
    return Agent(model=ScriptedModel(script), system="You are helpful.", **options)
