"""Letta-compatible tool rules and the solver the loop asks which tools may be called next.

Rule models use Letta's ``type`` values and field names so Agent Files round-trip.
The solver keeps the run's call history (Letta clears it once per run, not per model call)
and answers: which tools are allowed, whether a call is forced, whether a call is legal,
whether the loop must stop or continue, and what to tell the model in the system prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from stateloop.errors import ConfigError

__all__ = [
    "RULE_TYPES", "BaseToolRule", "ChildToolRule", "ConditionalToolRule", "ContinueToolRule",
    "InitToolRule", "MaxCountPerStepToolRule", "ParentToolRule", "RequiredBeforeExitToolRule",
    "RequiresApprovalToolRule", "TerminalToolRule", "ToolCallNode", "ToolRule", "ToolRulesSolver",
    "parse_tool_rules",
]


class BaseToolRule(BaseModel):
    """Fields every Letta tool rule carries."""

    # Letta's OpenAPI schemas say additionalProperties: false; a typo'd field is an error.
    model_config = ConfigDict(extra="forbid")

    tool_name: str
    type: str
    prompt_template: str | None = None


class ToolCallNode(BaseModel):
    """A child of a ``constrain_child_tools`` rule with arguments prefilled when it runs."""

    model_config = ConfigDict(extra="forbid")

    name: str
    args: dict[str, Any] | None = None


class InitToolRule(BaseToolRule):
    """``run_first``: the first call of a run must be this tool (``args`` are prefilled)."""

    type: Literal["run_first"] = "run_first"
    args: dict[str, Any] | None = None


class TerminalToolRule(BaseToolRule):
    """``exit_loop``: calling this tool ends the run with stop reason ``tool_rule``."""

    type: Literal["exit_loop"] = "exit_loop"


class ContinueToolRule(BaseToolRule):
    """``continue_loop``: calling this tool always continues the loop."""

    type: Literal["continue_loop"] = "continue_loop"


class ChildToolRule(BaseToolRule):
    """``constrain_child_tools``: right after this tool, one of ``children`` must be called."""

    type: Literal["constrain_child_tools"] = "constrain_child_tools"
    children: list[str]
    child_arg_nodes: list[ToolCallNode] | None = None

    @model_validator(mode="after")
    def _nodes_are_children(self) -> ChildToolRule:
        for node in self.child_arg_nodes or []:
            if node.name not in self.children:
                raise ValueError(f"child_arg_nodes names {node.name!r}, which is not in "
                                 f"children {self.children}")
        return self


class ConditionalToolRule(BaseToolRule):
    """``conditional``: this tool's output picks the next tool via ``child_output_mapping``."""

    type: Literal["conditional"] = "conditional"
    default_child: str | None = None
    child_output_mapping: dict[Any, str]
    require_output_mapping: bool = False

    @model_validator(mode="after")
    def _mapping_not_empty(self) -> ConditionalToolRule:
        if not self.child_output_mapping:
            raise ValueError("child_output_mapping must map at least one output to a tool")
        return self

    def select(self, output: str | None) -> set[str] | None:
        """Tools allowed after ``output``: {child}, set() (strict, no match) or None (any)."""
        value = _decode_output(output)
        for key, child in self.child_output_mapping.items():
            if output is not None and _matches(value, output.strip(), key):
                return {child}
        if self.require_output_mapping:
            return set()
        return {self.default_child} if self.default_child else None


class ParentToolRule(BaseToolRule):
    """``parent_last_tool``: ``children`` may only be called right after this tool."""

    type: Literal["parent_last_tool"] = "parent_last_tool"
    children: list[str]


class MaxCountPerStepToolRule(BaseToolRule):
    """``max_count_per_step``: at most ``max_count_limit`` calls of this tool per run."""

    type: Literal["max_count_per_step"] = "max_count_per_step"
    max_count_limit: int = Field(ge=0)


class RequiredBeforeExitToolRule(BaseToolRule):
    """``required_before_exit``: the run may not end until this tool has been called."""

    type: Literal["required_before_exit"] = "required_before_exit"


class RequiresApprovalToolRule(BaseToolRule):
    """``requires_approval``: a call to this tool pauses the run for a human decision."""

    type: Literal["requires_approval"] = "requires_approval"


_RULE_CLASSES: tuple[type[BaseToolRule], ...] = (
    InitToolRule, TerminalToolRule, ContinueToolRule, ChildToolRule, ConditionalToolRule,
    ParentToolRule, MaxCountPerStepToolRule, RequiredBeforeExitToolRule, RequiresApprovalToolRule,
)
RULE_TYPES: tuple[str, ...] = tuple(cls.model_fields["type"].default for cls in _RULE_CLASSES)

_CONSTRAINING = (InitToolRule, ChildToolRule, ConditionalToolRule, ParentToolRule,
                 MaxCountPerStepToolRule)

ToolRule = Annotated[
    InitToolRule | TerminalToolRule | ContinueToolRule | ChildToolRule | ConditionalToolRule
    | ParentToolRule | MaxCountPerStepToolRule | RequiredBeforeExitToolRule
    | RequiresApprovalToolRule,
    Field(discriminator="type"),
]
_RULE_ADAPTER: TypeAdapter[ToolRule] = TypeAdapter(ToolRule)


def parse_tool_rules(items: Iterable[BaseToolRule | dict[str, Any]]) -> list[ToolRule]:
    """Validate rule objects and Letta JSON dicts; errors name the rule index and field."""
    rules: list[ToolRule] = []
    for index, item in enumerate(items):
        where = f"tool_rules[{index}]"
        if isinstance(item, _RULE_CLASSES):
            rules.append(item)  # type: ignore[arg-type]  # one of the union's members
            continue
        if not isinstance(item, dict) and hasattr(item, "model_dump"):
            item = item.model_dump(mode="json")  # e.g. letta-client's rule models
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: expected a tool rule object or a dict, "
                              f"got {type(item).__name__}")
        kind = item.get("type")
        if kind not in RULE_TYPES:
            problem = "is missing" if kind is None else f"is unknown: {kind!r}"
            raise ConfigError(f"{where}.type {problem}; known types: {', '.join(RULE_TYPES)}")
        try:
            rules.append(_RULE_ADAPTER.validate_python(item))
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                # Drop the discriminator tag pydantic puts first in the location.
                loc = err["loc"][1:] if err["loc"][:1] == (kind,) else err["loc"]
                field = ".".join(str(part) for part in loc)
                problems.append(f"{where}{'.' + field if field else ''} ({kind}): {err['msg']}")
            raise ConfigError("; ".join(problems)) from None
    return rules


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
        hints = [line for rule in self.rules if isinstance(rule, _CONSTRAINING)
                 and (rule.tool_name in (tool_name, last)
                      or tool_name in getattr(rule, "children", ())
                      or (isinstance(rule, InitToolRule) and not self._history))
                 and (line := _render(rule))]
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
        lines = [line for rule in self.rules if (line := _render(rule))]
        if not lines:
            return ""
        return ("<tool_usage_rules>\nThe following constraints define rules for tool usage and "
                "guide desired behavior. These rules must be followed to ensure proper tool "
                "execution and workflow.\n\n" + "\n".join(lines) + "\n</tool_usage_rules>")


# -- rendering -------------------------------------------------------------------------------

_DEFAULT_TEXT: dict[str, str] = {
    "run_first": "{{ tool_name }} must be called first",
    "exit_loop": "{{ tool_name }} ends your response (yields control) when called",
    "continue_loop": "{{ tool_name }} requires continuing your response when called",
    "constrain_child_tools": "After using {{ tool_name }}, you must use one of these tools: "
                             "{{ children }}",
    "conditional": "{{ tool_name }} will determine which tool to use next based on its output",
    "parent_last_tool": "{{ children }} can only be used after {{ tool_name }}",
    "max_count_per_step": "{{ tool_name }}: at most {{ max_count_limit }} use(s) per response",
    "required_before_exit": "{{ tool_name }} must be called before ending the conversation",
}
# The subset of Jinja that Letta's templates used: ``{{ field }}`` and ``{{ field | join(', ') }}``.
_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*(?:\|\s*join\(\s*(['\"])(.*?)\2\s*\)\s*)?\}\}")


def _render(rule: BaseToolRule) -> str:
    """One rule's prompt text: its ``prompt_template`` if given, else Letta's default line."""
    if rule.prompt_template:
        template = rule.prompt_template
    elif rule.type in _DEFAULT_TEXT:
        template = f"<tool_rule>\n{_DEFAULT_TEXT[rule.type]}\n</tool_rule>"
    else:
        return ""  # requires_approval: enforced by the runtime, nothing for the model to follow
    fields = rule.model_dump()

    def substitute(match: re.Match[str]) -> str:
        name, separator = match.group(1), match.group(3)
        if name not in fields:
            return match.group(0)
        value = fields[name]
        if isinstance(value, list):
            return (", " if separator is None else separator).join(str(v) for v in value)
        return str(value)

    return _PLACEHOLDER.sub(substitute, template)


# -- conditional output matching -------------------------------------------------------------

def _decode_output(output: str | None) -> Any:
    """The tool output as a value: JSON when it parses, Letta's packaged ``message`` unwrapped."""
    if output is None:
        return None
    value = _try_json(output)
    # Letta stores tool returns as {"status": ..., "message": ..., "time": ...}; imported
    # transcripts carry that shape, and its rules match on the message.
    if isinstance(value, dict) and {"status", "message"} <= value.keys():
        inner = value["message"]
        value = _try_json(inner) if isinstance(inner, str) else inner
    return value


def _try_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _matches(value: Any, raw: str, key: Any) -> bool:
    """Letta's key matching (bool, int, float, str), tolerant of JSON's string-only keys."""
    # Agent Files store every mapping key as a string ("True", "3"), so decode it first.
    key_value = _try_json(key) if isinstance(key, str) else key
    key_bool = _as_bool(key_value)
    if key_bool is not None:
        return _as_bool(value) == key_bool  # case-insensitive, as in Letta
    key_number = _as_number(key_value)
    if key_number is not None:
        return _as_number(value) == key_number
    return str(key) in (raw, str(value)) or key_value == value
