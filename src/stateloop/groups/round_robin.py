"""``round_robin``: members speak in their order, one turn each, for ``max_turns`` turns
(Letta's default: one round, as many turns as members). Each member is given what the group
said since its last turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..agent import Agent
    from .base import Session


@dataclass(slots=True)
class RoundRobin:
    """Members take turns in order; ``max_turns`` defaults to the number of members."""

    max_turns: int | None = None
    manager_type: str = "round_robin"

    def __post_init__(self) -> None:
        check_turns(self.max_turns)

    def agents(self) -> list[Agent]:
        return []

    def record_fields(self) -> dict[str, Any]:
        return {"max_turns": self.max_turns}

    async def drive(self, session: Session) -> None:
        members = session.group.agents
        for turn in range(self.max_turns or len(members)):
            await session.member_turn(members[turn % len(members)])
        session.stop_reason = "max_turns"


def check_turns(max_turns: int | None) -> None:
    if max_turns is not None and (type(max_turns) is not int or max_turns < 1):
        raise ConfigError(f"max_turns must be a positive integer, not {max_turns!r}")
