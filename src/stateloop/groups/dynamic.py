"""``dynamic``: before every turn a manager agent reads the conversation and names who speaks
next (never the member who just spoke, when there is another); the group stops when a reply
holds ``termination_token`` or after ``max_turns`` turns (default: one per member)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..messages import user
from .base import MemberFailed
from .round_robin import check_turns

if TYPE_CHECKING:
    from ..agent import Agent
    from .base import Session


@dataclass(slots=True)
class Dynamic:
    """A manager agent picks each next speaker by naming it in its reply."""

    manager: Agent
    termination_token: str = "DONE!"
    max_turns: int | None = None
    manager_type: str = "dynamic"

    def __post_init__(self) -> None:
        check_turns(self.max_turns)

    def agents(self) -> list[Agent]:
        return [self.manager]

    def record_fields(self) -> dict[str, Any]:
        return {"manager_agent_id": self.manager.id, "max_turns": self.max_turns,
                "termination_token": self.termination_token}

    async def drive(self, session: Session) -> None:
        members = session.group.agents
        speaker: Agent | None = None
        for _ in range(self.max_turns or len(members)):
            options = [m for m in members if m is not speaker] or list(members)
            choice = await session.turn(self.manager, [self._ask(session, options)])
            speaker = _named(choice.output, options)
            if speaker is None:
                raise MemberFailed(f"the manager named none of {[m.name for m in options]}: "
                                   f"{choice.output!r}")
            end = await session.member_turn(speaker)
            if self.termination_token and self.termination_token in end.output:
                session.stop_reason = "end_turn"
                return
        session.stop_reason = "max_turns"

    def _ask(self, session: Session, options: list[Agent]) -> Any:
        history = "\n".join(f"{m.name or 'user'}: {m.text}" for m in session.group.messages)
        names = ", ".join(f"{m.name} ({m.id})" for m in options)
        return user(
            "Choose the most suitable agent to reply to the latest message in the group chat "
            f"from the following options: {names}. Do not respond to the messages yourself; "
            "your task is only to name the next speaker, not to participate.\n"
            f"Group description: {session.group.description}\nChat history:\n{history}")


def _named(text: str, options: list[Agent]) -> Agent | None:
    """The option the manager named (by id, else by name; the last named wins, as in
    Letta)."""
    lowered = text.lower()
    chosen = None
    for agent in options:
        if agent.id.lower() in lowered:
            return agent
        if agent.name.lower() in lowered:
            chosen = agent
    return chosen
