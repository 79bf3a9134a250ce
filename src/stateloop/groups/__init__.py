"""Groups of agents under a manager type, as Letta has them: ``round_robin``, ``supervisor``
and ``dynamic`` run here; a ``sleeptime`` group is stored and listed (its behaviour lives with
the sleeptime agents)."""

from __future__ import annotations

from .base import GroupEvent, GroupResult, Manager
from .dynamic import Dynamic
from .group import Group, manager_from_record
from .round_robin import RoundRobin
from .supervisor import Supervisor

__all__ = ["Dynamic", "Group", "GroupEvent", "GroupResult", "Manager", "RoundRobin",
           "Supervisor", "manager_from_record"]
