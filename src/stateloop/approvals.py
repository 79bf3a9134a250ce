"""Human approval of tool calls, as plain data: a paused run can resume in another process."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .errors import StateloopError
from .messages import ToolCall

DENIAL_PREFIX = "request to call tool denied. User reason: "


class ApprovalError(StateloopError, ValueError):
    """Approvals that do not fit the pending request, or input sent while one is pending."""


@dataclass(slots=True)
class Approval:
    """A decision on one call: approve it, deny it with a reason, or supply its result
    (``result``) for a tool the client runs itself."""

    tool_call_id: str
    approve: bool = True
    reason: str | None = None
    result: str | None = None
    is_error: bool = False  # with ``result``: the client-side tool failed


@dataclass(slots=True)
class PendingApproval:
    """A step paused before any of its calls ran; ``requested`` are the ids awaiting a human."""

    run_id: str
    calls: list[ToolCall]  # every call of the paused step, in call order
    requested: list[str]
    rules_state: dict[str, Any] | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def requested_calls(self) -> list[ToolCall]:
        return [c for c in self.calls if c.id in self.requested]

    def check(self, approvals: list[Approval]) -> dict[str, Approval]:
        """The approvals by call id; an error names unknown, duplicate or missing ids."""
        decided: dict[str, Approval] = {}
        for approval in approvals:
            if approval.tool_call_id not in self.requested:
                raise ApprovalError(
                    f"approval for tool call {approval.tool_call_id!r}, which is not awaiting "
                    f"approval; pending: {', '.join(self.requested)}")
            if approval.tool_call_id in decided:
                raise ApprovalError(f"two approvals for tool call {approval.tool_call_id!r}")
            decided[approval.tool_call_id] = approval
        missing = [i for i in self.requested if i not in decided]
        if missing:
            raise ApprovalError(f"no decision for pending tool calls: {', '.join(missing)}")
        return decided

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "calls": [c.to_dict() for c in self.calls],
                "requested": list(self.requested), "rules_state": self.rules_state,
                "created_at": self.created_at}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingApproval:
        return cls(data["run_id"], [ToolCall.from_dict(c) for c in data["calls"]],
                   list(data["requested"]), data.get("rules_state"),
                   float(data.get("created_at") or time.time()))


def denial_text(reason: str | None) -> str:
    return DENIAL_PREFIX + (reason or "(no reason given)")
