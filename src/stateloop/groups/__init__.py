"""Groups of agents under a manager type, as Letta has them: ``round_robin``, ``supervisor``
and ``dynamic`` run here; a ``sleeptime`` group is stored and listed (its behaviour lives with
the sleeptime agents)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .base import Group, GroupEvent, GroupResult, Manager
from .dynamic import Dynamic
from .round_robin import RoundRobin
from .supervisor import Supervisor

if TYPE_CHECKING:
    from ..agent import Agent
    from ..store.groups import GroupRecord

__all__ = ["Dynamic", "Group", "GroupEvent", "GroupResult", "Manager", "RoundRobin",
           "Supervisor", "manager_from_record"]


def manager_from_record(record: GroupRecord, manager: Agent | None) -> Any:
    """The manager type a stored group names, with its manager agent."""
    kind = record.manager_type
    if kind == "round_robin":
        return RoundRobin(record.max_turns)
    if manager is None:
        raise ConfigError(f"group {record.id!r} ({kind}) has no manager agent")
    if kind == "supervisor":
        return Supervisor(manager)
    if kind == "dynamic":
        return Dynamic(manager, record.termination_token or "DONE!", record.max_turns)
    raise ConfigError(f"group {record.id!r} is a {kind!r} group, which does not run here")
