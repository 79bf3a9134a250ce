"""``ToolRulesSolver``: one run's tool calls, and what the rules allow next.

The solver keeps the run's call history (Letta clears it once per run, not per model call)
and answers: which tools are allowed, whether a call is forced, whether a call is legal,
whether the loop must stop or continue, and what to tell the model in the system prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from stateloop.errors import ConfigError

from .kinds import (
    CONSTRAINING,
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
    ToolRule,
    parse_tool_rules,
)
from .prompt import render


class ToolRulesSolver:
    """Tracks one run's tool calls and decides, per model call, what the rules allow."""

    def __init__(self, rules: Iterable[BaseToolRule | dict[str, Any]] = (), *,
                 max_exit_reminders: int = 3) -> None:
        self.rules: list[ToolRule] = parse_tool_rules(rules)
        self.max_exit_reminders = max_exit_reminders
        self._history: list[str] = []
        self._last_output: str | None = None
        self._exit_reminders = 0

    # -- run state -----------------------------------------------------------------------

    def start_run(self) -> None:
        """Forget the previous run's calls (Letta keeps history per run, never across runs)."""
        self._history.clear()
        self._last_output = None
        self._exit_reminders = 0

    def start_step(self) -> None:
        """Mark a new model call; a no-op because Letta's counts span the whole run."""

    def record_call(self, tool_name: str, output: str | None) -> None:
        """Record an executed call and its output (conditional rules match on the latest)."""
        self._history.append(tool_name)
        self._last_output = output

    @property
    def history(self) -> list[str]:
        """Names of the tools executed so far in this run, in order."""
        return list(self._history)

    def to_state(self) -> dict[str, Any]:
        """JSON-able run state, so a paused run can resume in another process."""
        return {"history": list(self._history), "last_output": self._last_output,
                "exit_reminders": self._exit_reminders}

    @classmethod
    def from_state(cls, rules: Iterable[BaseToolRule | dict[str, Any]], state: dict[str, Any],
                   *, max_exit_reminders: int = 3) -> ToolRulesSolver:
        """A solver for ``rules`` that continues from ``to_state()``'s output."""
        solver = cls(rules, max_exit_reminders=max_exit_reminders)
        history, last = state.get("history", []), state.get("last_output")
        if not (isinstance(history, list) and all(isinstance(n, str) for n in history)):
            raise ConfigError("tool rules state.history must be a list of tool names")
        if last is not None and not isinstance(last, str):
            raise ConfigError("tool rules state.last_output must be a string or null")
        solver._history = list(history)
        solver._last_output = last
        solver._exit_reminders = int(state.get("exit_reminders", 0))
        return solver

    # -- what may be called --------------------------------------------------------------

    def _solve(self, available: Sequence[str]) -> tuple[list[str], bool]:
        """(allowed tools in ``available`` order, whether a rule forces a tool call)."""
        names = list(dict.fromkeys(available))
        present = set(names)
        if not self._history:
            # run_first naming unattached tools is ignored rather than leaving nothing allowed.
            first = {r.tool_name for r in self.rules
                     if isinstance(r, InitToolRule) and r.tool_name in present}
            if first:
                return [n for n in names if n in first], True
        last = self._history[-1] if self._history else None
        allowed, forced = set(present), False
        for rule in self.rules:
            if isinstance(rule, ChildToolRule | ConditionalToolRule | ParentToolRule):
                if rule.tool_name != last:
                    if isinstance(rule, ParentToolRule):  # children wait for their parent
                        allowed -= set(rule.children)
                    continue
                # Like Letta, a firing child/conditional/parent rule forces a tool call.
                forced = True
                if isinstance(rule, ConditionalToolRule):
                    targets = rule.select(self._last_output)
                    if targets == set():  # require_output_mapping and no case matched
                        allowed = set()
                        continue
                else:
                    targets = set(rule.children)
                # Targets none of which are attached are ignored (Letta falls back to all tools
                # then) so a rule naming a missing tool cannot dead-end the run.
                if targets is not None and targets & present:
                    allowed &= targets
            elif (isinstance(rule, MaxCountPerStepToolRule)
                  # Letta counts over the run's history (its "step" is one user turn).
                  and self._history.count(rule.tool_name) >= rule.max_count_limit):
                allowed.discard(rule.tool_name)
        result = [n for n in names if n in allowed]
        return result, forced and bool(result)

    def allowed_tools(self, available: Sequence[str]) -> list[str]:
        """Tools whose schemas go to the next model call, in ``available`` order."""
        return self._solve(available)[0]

    def tool_choice(self, available: Sequence[str]) -> tuple[str, str | None]:
        """("auto" | "required" | "none", the forced tool's name when only one is allowed)."""
        return self.next_call(available)[1:]

    def next_call(self, available: Sequence[str]) -> tuple[list[str], str, str | None]:
        """``allowed_tools`` and ``tool_choice`` together, solved once (the loop's per-step
        question)."""
        allowed, forced = self._solve(available)
        if not allowed:
            return allowed, "none", None
        if forced:
            return allowed, "required", allowed[0] if len(allowed) == 1 else None
        return allowed, "auto", None

    def prefilled_args(self, tool_name: str) -> dict[str, Any]:
        """Arguments the active rules fix for ``tool_name``; they override the model's."""
        args: dict[str, Any] = {}
        last = self._history[-1] if self._history else None
        for rule in self.rules:
            if isinstance(rule, InitToolRule) and not self._history and rule.tool_name == tool_name:
                args.update(rule.args or {})
            elif isinstance(rule, ChildToolRule) and rule.tool_name == last:
                for node in rule.child_arg_nodes or []:
                    if node.name == tool_name:
                        args.update(node.args or {})
        return args

    def check_call(self, tool_name: str, available: Sequence[str]) -> str | None:
        """None when the call is allowed now, else an error text naming the allowed tools."""
        allowed = self.allowed_tools(available)
        if tool_name in allowed:
            return None
        if allowed:
            text = (f"[ToolConstraintError] Cannot call {tool_name}; "
                    f"valid tools now: {', '.join(allowed)}.")
        else:
            text = (f"[ToolConstraintError] Cannot call {tool_name}; the tool rules allow no "
                    "tool call now, so answer without calling a tool.")
        # Hint with the rules that constrain this call, like Letta's guess_rule_violation.
        last = self._history[-1] if self._history else None
        hints = [line for rule in self.rules if isinstance(rule, CONSTRAINING)
                 and (rule.tool_name in (tool_name, last)
                      or tool_name in getattr(rule, "children", ())
                      or (isinstance(rule, InitToolRule) and not self._history))
                 and (line := render(rule))]
        if hints:
            text += "\nRules that apply:\n" + "\n".join(hints)
        return text

    # -- loop control --------------------------------------------------------------------

    def is_exit(self, tool_name: str) -> bool:
        """Whether calling ``tool_name`` ends the run (``exit_loop``)."""
        return any(isinstance(r, TerminalToolRule) and r.tool_name == tool_name
                   for r in self.rules)

    def is_continue(self, tool_name: str) -> bool:
        """Whether calling ``tool_name`` always continues the loop (``continue_loop``)."""
        return any(isinstance(r, ContinueToolRule) and r.tool_name == tool_name
                   for r in self.rules)

    def requires_approval(self, tool_name: str) -> bool:
        """Whether a call to ``tool_name`` must wait for a human's approval."""
        return any(isinstance(r, RequiresApprovalToolRule) and r.tool_name == tool_name
                   for r in self.rules)

    def missing_before_exit(self, available: Sequence[str]) -> list[str]:
        """``required_before_exit`` tools not yet called this run (unattached ones skipped)."""
        present = set(available)
        missing = [r.tool_name for r in self.rules if isinstance(r, RequiredBeforeExitToolRule)
                   and r.tool_name in present and r.tool_name not in self._history]
        return list(dict.fromkeys(missing))

    def exit_reminder(self, available: Sequence[str]) -> str | None:
        """A reminder to inject when the model stops early; None when nothing is missing or
        the reminder budget (``max_exit_reminders``) is spent, so the loop must stop."""
        missing = self.missing_before_exit(available)
        if not missing or self._exit_reminders >= self.max_exit_reminders:
            return None
        self._exit_reminders += 1
        return (f"[ToolRuleViolated] You must call {', '.join(missing)} at least once "
                "before ending your response.")

    @property
    def disables_parallel_calls(self) -> bool:
        """True when any rule other than ``requires_approval`` exists (order matters then)."""
        return any(not isinstance(r, RequiresApprovalToolRule) for r in self.rules)

    # -- prompt ----------------------------------------------------------------------------

    def render_prompt(self) -> str:
        """The system prompt's tool-usage section; empty when no rule has anything to say."""
        lines = [line for rule in self.rules if (line := render(rule))]
        if not lines:
            return ""
        return ("<tool_usage_rules>\nThe following constraints define rules for tool usage and "
                "guide desired behavior. These rules must be followed to ensure proper tool "
                "execution and workflow.\n\n" + "\n".join(lines) + "\n</tool_usage_rules>")
