"""Letta-compatible tool rules and the solver the loop asks which tools may be called next.

Rule models use Letta's ``type`` values and field names so Agent Files round-trip. The
package is split by job: ``kinds`` (one model per rule type, and parsing Letta's JSON),
``solver`` (one run's call history, and what the rules allow next), ``prompt`` (the rules
as the system prompt states them), ``matching`` (a conditional rule's output cases).
"""

from .kinds import (
    RULE_TYPES,
    BaseToolRule,
    ChildToolRule,
    ConditionalToolRule,
    ContinueToolRule,
    InitToolRule,
    MaxCountPerStepToolRule,
    ParentToolRule,
    RequiredBeforeExitToolRule,
    RequiresApprovalToolRule,
    TerminalToolRule,
    ToolCallNode,
    ToolRule,
    parse_tool_rules,
)
from .solver import ToolRulesSolver

__all__ = [
    "RULE_TYPES", "BaseToolRule", "ChildToolRule", "ConditionalToolRule", "ContinueToolRule",
    "InitToolRule", "MaxCountPerStepToolRule", "ParentToolRule", "RequiredBeforeExitToolRule",
    "RequiresApprovalToolRule", "TerminalToolRule", "ToolCallNode", "ToolRule", "ToolRulesSolver",
    "parse_tool_rules",
]
