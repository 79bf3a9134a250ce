"""``AgentFileError``: an Agent File that cannot be imported, naming what is wrong."""

from __future__ import annotations

from ..errors import StateloopError


class AgentFileError(StateloopError, ValueError):
    """An Agent File that cannot be imported; ``field`` is the path to what is wrong
    (``agents.0.messages.3.role``), or ``"file"`` for the file as a whole."""

    def __init__(self, message: str, *, field: str = "file") -> None:
        super().__init__(f"{field}: {message}" if field != "file" else message)
        self.field = field
        self.reason = message
