"""The kinds of tool rule, one pydantic model per Letta ``type``, and parsing them from rule
objects or Letta's JSON dicts with errors that name the rule and field."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from stateloop.errors import ConfigError

from .matching import decode_output, matches


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
        value = decode_output(output)
        for key, child in self.child_output_mapping.items():
            if output is not None and matches(value, output.strip(), key):
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

# The kinds that limit which tool may come next: a refused call is told about them.
CONSTRAINING = (InitToolRule, ChildToolRule, ConditionalToolRule, ParentToolRule,
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
