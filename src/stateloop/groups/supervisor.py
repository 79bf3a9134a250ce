"""``supervisor``: a manager agent answers the user, routing work with a tool that sends a
message to every member at once and returns their replies. The members run concurrently,
each a real run of its own; the manager's own reply ends the group run."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..tools import Tool
from ..tools.base import tool
from .base import GroupMessage

if TYPE_CHECKING:
    from ..agent import Agent
    from .base import Session

TOOL_NAME = "send_message_to_all_agents_in_group"


@dataclass(slots=True)
class Supervisor:
    """A manager agent that messages every member with ``send_message_to_all_agents_in_group``."""

    manager: Agent
    manager_type: str = "supervisor"

    def agents(self) -> list[Agent]:
        return [self.manager]

    def record_fields(self) -> dict[str, Any]:
        return {"manager_agent_id": self.manager.id}

    async def drive(self, session: Session) -> None:
        group, manager = session.group, self.manager
        upto = group.last_seq()
        end = await session.turn(manager, group.unseen(manager),
                                 tools=[routing_tool(session, manager)])
        group.seen(manager, upto)
        if end.output:
            await session.say([GroupMessage("assistant", end.output, sender_id=manager.id,
                                            name=manager.name, run_id=end.run_id)])
        session.turns += 1
        session.stop_reason = "end_turn"


def routing_tool(session: Session, manager: Agent) -> Tool:
    """The manager's tool for this run: the message goes to every member, whose replies come
    back as one JSON list."""

    async def send_message_to_all_agents_in_group(message: str) -> str:
        """Send a message to every agent in the group and wait for all their replies.

        Args:
            message: The message to send to every agent in the group.
        """
        note = GroupMessage("assistant", message, sender_id=manager.id, name=manager.name)
        await session.say([note])
        members = session.group.agents
        ends = await asyncio.gather(*(session.member_turn(m) for m in members))
        return json.dumps([{"agent_id": m.id, "name": m.name, "reply": end.output}
                           for m, end in zip(members, ends, strict=True)])

    return tool(timeout=None)(send_message_to_all_agents_in_group)

