"""What a turn shows, the same for a local agent and a server: text, tool calls, the end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..persistence import run_status


@dataclass(slots=True)
class Text:
    """Assistant text as it streams."""

    text: str


@dataclass(slots=True)
class Reasoning:
    text: str


@dataclass(slots=True)
class ToolCallShown:
    """A complete tool call the model made."""

    id: str
    name: str
    arguments: dict[str, Any] | str


@dataclass(slots=True)
class ToolResultShown:
    name: str
    text: str
    is_error: bool = False


@dataclass(slots=True)
class Note:
    """Anything else worth a dim line (compaction, ...)."""

    text: str


@dataclass(slots=True)
class PendingCall:
    """A tool call waiting for a human's approval."""

    id: str
    name: str
    arguments: dict[str, Any] | str


@dataclass(slots=True)
class TurnEnd:
    stop_reason: str
    error: str | None = None
    output: str = ""
    pending: list[PendingCall] = field(default_factory=list)


@dataclass(slots=True)
class Decision:
    """A human's answer to a pending call."""

    tool_call_id: str
    approve: bool
    reason: str | None = None


Item = Text | Reasoning | ToolCallShown | ToolResultShown | Note
Sink = Callable[[Item], None]
RawSink = Callable[[dict[str, Any]], None]


def failed(stop_reason: str) -> bool:
    """Whether a run that stopped for ``stop_reason`` failed (exit code 1)."""
    return run_status(stop_reason) == "failed"  # type: ignore[arg-type]


class Session(Protocol):
    """One agent to talk to, local or on a server."""

    name: str

    def turn(self, text: str | None, *, decisions: list[Decision] | None = None,
             on_item: Sink, on_raw: RawSink | None = None) -> TurnEnd:
        """Send ``text`` (or answer pending approvals) and stream the run to ``on_item``."""
        ...

    def pending(self) -> list[PendingCall]:
        """Calls awaiting approval from an earlier session."""
        ...

    def blocks(self) -> list[tuple[str, str]]:
        """Core memory as (label, value)."""
        ...

    def context_data(self) -> dict[str, Any]:
        """Letta's ``ContextWindowOverview`` as JSON-able data."""
        ...

    def context_view(self) -> str:
        """The assembled context, message by message (the debug view)."""
        ...

    def reset(self) -> None:
        """Forget the conversation; memory blocks stay."""
        ...

    def close(self) -> None: ...
