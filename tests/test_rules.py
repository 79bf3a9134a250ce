"""Letta-compatible tool rules: parsing, round-trip, the solver's decisions, prompt rendering."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared_fixtures import LETTA_AF
from stateloop.errors import ConfigError
from stateloop.tools.rules import (
    RULE_TYPES,
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
    ToolRulesSolver,
    parse_tool_rules,
)

FIXTURES = LETTA_AF
OUTREACH_TOOLS = ["evaluate_candidate", "reject", "retrieve_candidate", "send_email"]


def load_af_rules(name: str) -> list[dict[str, Any]]:
    """The tool_rules dicts of an Agent File's first agent, exactly as stored."""
    data: Any = json.loads((FIXTURES / name).read_text())
    while isinstance(data, str):  # these fixtures are JSON-encoded twice
        data = json.loads(data)
    rules: list[dict[str, Any]] = data["agents"][0]["tool_rules"]
    return rules


# -- parsing -------------------------------------------------------------------------------

def test_parse_dicts_gives_one_class_per_letta_type() -> None:
    dicts: list[dict[str, Any]] = [
        {"type": "run_first", "tool_name": "a", "args": {"x": 1}},
        {"type": "exit_loop", "tool_name": "a"},
        {"type": "continue_loop", "tool_name": "a"},
        {"type": "constrain_child_tools", "tool_name": "a", "children": ["b"]},
        {"type": "conditional", "tool_name": "a", "child_output_mapping": {"x": "b"}},
        {"type": "parent_last_tool", "tool_name": "a", "children": ["b"]},
        {"type": "max_count_per_step", "tool_name": "a", "max_count_limit": 2},
        {"type": "required_before_exit", "tool_name": "a"},
        {"type": "requires_approval", "tool_name": "a"},
    ]
    classes = [type(rule) for rule in parse_tool_rules(dicts)]
    assert classes == [InitToolRule, TerminalToolRule, ContinueToolRule, ChildToolRule,
                       ConditionalToolRule, ParentToolRule, MaxCountPerStepToolRule,
                       RequiredBeforeExitToolRule, RequiresApprovalToolRule]
    assert [d["type"] for d in dicts] == list(RULE_TYPES)


def test_parse_accepts_objects_and_dicts_mixed_and_keeps_objects() -> None:
    rule = TerminalToolRule(tool_name="done")
    parsed = parse_tool_rules([rule, {"type": "exit_loop", "tool_name": "stop"}])
    assert parsed[0] is rule  # objects pass through untouched
    assert parsed[1] == TerminalToolRule(tool_name="stop")


@pytest.mark.parametrize("name", ["outreach_workflow_agent.af", "memgpt_agent.af"])
def test_fixture_rules_round_trip_losslessly(name: str) -> None:
    stored = load_af_rules(name)
    rules = parse_tool_rules(stored)
    assert [rule.model_dump(mode="json") for rule in rules] == stored
    # The compact form (nulls dropped) must parse back to the same rules.
    compact = [rule.model_dump(mode="json", exclude_none=True) for rule in rules]
    assert parse_tool_rules(compact) == rules


def test_outreach_fixture_has_the_expected_rules() -> None:
    # Guards the round-trip test above against silently testing an empty list.
    types = [rule.type for rule in parse_tool_rules(load_af_rules("outreach_workflow_agent.af"))]
    assert types == ["run_first", "constrain_child_tools", "conditional", "exit_loop",
                     "exit_loop"]


@pytest.mark.parametrize(("item", "expected"), [
    ({"type": "loop_forever", "tool_name": "a"},
     "tool_rules[1].type is unknown: 'loop_forever'; known types: run_first, exit_loop"),
    ({"tool_name": "a"}, "tool_rules[1].type is missing"),
    ({"type": "constrain_child_tools", "tool_name": "a"}, "tool_rules[1].children"),
    ({"type": "exit_loop"}, "tool_rules[1].tool_name"),
    ({"type": "max_count_per_step", "tool_name": "a", "max_count_limit": "many"},
     "tool_rules[1].max_count_limit"),
    ({"type": "max_count_per_step", "tool_name": "a", "max_count_limit": -1},
     "tool_rules[1].max_count_limit"),
    ({"type": "exit_loop", "tool_name": "a", "childs": ["b"]}, "tool_rules[1].childs"),
    ({"type": "conditional", "tool_name": "a", "child_output_mapping": {}},
     "child_output_mapping must map at least one"),
    ({"type": "constrain_child_tools", "tool_name": "a", "children": ["b"],
      "child_arg_nodes": [{"name": "c", "args": {}}]}, "'c', which is not in children"),
    (42, "tool_rules[1]: expected a tool rule object or a dict, got int"),
])
def test_bad_rules_raise_config_error_naming_index_and_field(item: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_tool_rules([{"type": "exit_loop", "tool_name": "ok"}, item])
    assert expected in str(info.value)


# -- run_first -----------------------------------------------------------------------------

def test_run_first_forces_named_call_then_releases() -> None:
    solver = ToolRulesSolver([{"type": "run_first", "tool_name": "fetch", "args": {"n": 3}}])
    tools = ["search", "fetch"]
    assert solver.allowed_tools(tools) == ["fetch"]
    assert solver.tool_choice(tools) == ("required", "fetch")
    assert solver.prefilled_args("fetch") == {"n": 3}
    solver.record_call("fetch", "ok")
    assert solver.allowed_tools(tools) == tools
    assert solver.tool_choice(tools) == ("auto", None)
    assert solver.prefilled_args("fetch") == {}  # args apply only to the first call


def test_several_run_first_rules_force_a_call_without_naming_one() -> None:
    solver = ToolRulesSolver([InitToolRule(tool_name="a"), InitToolRule(tool_name="b")])
    assert solver.tool_choice(["a", "b", "c"]) == ("required", None)
    assert solver.allowed_tools(["c", "b", "a"]) == ["b", "a"]  # available order kept


def test_run_first_naming_an_unattached_tool_is_ignored() -> None:
    solver = ToolRulesSolver([InitToolRule(tool_name="gone")])
    assert solver.allowed_tools(["a", "b"]) == ["a", "b"]
    assert solver.tool_choice(["a", "b"]) == ("auto", None)


def test_rejected_first_call_is_flagged_and_leaves_run_first_active() -> None:
    solver = ToolRulesSolver([InitToolRule(tool_name="fetch")])
    error = solver.check_call("search", ["search", "fetch"])
    assert error is not None and "search" in error and "valid tools now: fetch" in error
    assert solver.check_call("fetch", ["search", "fetch"]) is None
    # The loop does not record a call it refused, so the rule still holds.
    assert solver.tool_choice(["search", "fetch"]) == ("required", "fetch")


# -- exit_loop, continue_loop, requires_approval ----------------------------------------------

def test_exit_continue_and_approval_flags_only_match_their_tools() -> None:
    solver = ToolRulesSolver([TerminalToolRule(tool_name="done"),
                              ContinueToolRule(tool_name="think"),
                              RequiresApprovalToolRule(tool_name="pay")])
    assert solver.is_exit("done") and not solver.is_exit("think")
    assert solver.is_continue("think") and not solver.is_continue("done")
    assert solver.requires_approval("pay") and not solver.requires_approval("done")
    # None of these restrict which tools may be called.
    assert solver.allowed_tools(["done", "think", "pay"]) == ["done", "think", "pay"]


def test_parallel_calls_disabled_by_any_rule_except_requires_approval() -> None:
    assert not ToolRulesSolver([]).disables_parallel_calls
    assert not ToolRulesSolver([RequiresApprovalToolRule(tool_name="pay")]).disables_parallel_calls
    assert ToolRulesSolver([RequiresApprovalToolRule(tool_name="pay"),
                            ContinueToolRule(tool_name="x")]).disables_parallel_calls


# -- constrain_child_tools -------------------------------------------------------------------

def test_child_rule_constrains_only_the_next_call_and_prefills_args() -> None:
    rule = ChildToolRule(tool_name="plan", children=["act", "ask"],
                         child_arg_nodes=[ToolCallNode(name="act", args={"dry_run": True})])
    solver = ToolRulesSolver([rule])
    tools = ["plan", "act", "ask", "other"]
    assert solver.allowed_tools(tools) == tools
    assert solver.prefilled_args("act") == {}
    solver.record_call("plan", "ok")
    assert solver.allowed_tools(tools) == ["act", "ask"]
    assert solver.tool_choice(tools) == ("required", None)
    assert solver.prefilled_args("act") == {"dry_run": True}
    assert solver.prefilled_args("ask") == {}
    solver.record_call("act", "ok")
    assert solver.allowed_tools(tools) == tools


def test_child_rule_with_no_attached_children_falls_back_to_all_tools() -> None:
    # Letta falls back to every tool when a constraint leaves none; a dead end helps no one.
    solver = ToolRulesSolver([ChildToolRule(tool_name="plan", children=["missing"])])
    solver.record_call("plan", "ok")
    assert solver.allowed_tools(["plan", "act"]) == ["plan", "act"]


def test_two_firing_child_rules_intersect() -> None:
    solver = ToolRulesSolver([ChildToolRule(tool_name="p", children=["a", "b"]),
                              ChildToolRule(tool_name="p", children=["b", "c"])])
    solver.record_call("p", None)
    assert solver.tool_choice(["a", "b", "c", "p"]) == ("required", "b")


# -- conditional -----------------------------------------------------------------------------

@pytest.mark.parametrize(("mapping", "output", "expected"), [
    ({"True": "yes", "False": "no"}, "true", "yes"),       # .af string keys vs JSON bool
    ({"True": "yes", "False": "no"}, "False", "no"),       # str(False) from a Python tool
    ({True: "yes", False: "no"}, "TRUE", "yes"),           # Letta: bool keys ignore case
    ({"1": "one", "2": "two"}, "2", "two"),                # int
    ({3: "three"}, "3.0", "three"),                         # int key, float-looking output
    ({"0.5": "half"}, "0.5", "half"),                       # float
    ({"approved": "yes", "denied": "no"}, "denied", "no"),  # plain string
    ({"approved": "yes"}, '"approved"', "yes"),              # JSON-encoded string
    ({'{"ok": true}': "yes"}, '{"ok":true}', "yes"),         # JSON object
    ({"True": "yes"}, json.dumps({"status": "OK", "message": "True", "time": "t"}), "yes"),
])
def test_conditional_matches_output_to_child(mapping: dict[Any, str], output: str,
                                             expected: str) -> None:
    solver = ToolRulesSolver([ConditionalToolRule(tool_name="judge",
                                                  child_output_mapping=mapping)])
    tools = ["judge", "yes", "no", "one", "two", "three", "half"]
    solver.record_call("judge", output)
    assert solver.tool_choice(tools) == ("required", expected)


@pytest.mark.parametrize(("output", "expected"), [
    ("1", "two"),      # bool key must not match the int 1
    ("maybe", "two"),  # no case matches
    (None, "two"),     # no output recorded at all
])
def test_conditional_falls_back_to_default_child(output: str | None, expected: str) -> None:
    rule = ConditionalToolRule(tool_name="judge", child_output_mapping={"true": "one"},
                               default_child="two")
    solver = ToolRulesSolver([rule])
    solver.record_call("judge", output)
    assert solver.allowed_tools(["judge", "one", "two"]) == [expected]


def test_conditional_without_default_allows_any_tool_but_still_forces_a_call() -> None:
    solver = ToolRulesSolver([ConditionalToolRule(tool_name="judge",
                                                  child_output_mapping={"a": "one"})])
    solver.record_call("judge", "b")
    assert solver.allowed_tools(["judge", "one"]) == ["judge", "one"]
    assert solver.tool_choice(["judge", "one"]) == ("required", None)


def test_conditional_requiring_a_match_allows_nothing_when_none_matches() -> None:
    solver = ToolRulesSolver([ConditionalToolRule(tool_name="judge", default_child="one",
                                                  child_output_mapping={"a": "one"},
                                                  require_output_mapping=True)])
    solver.record_call("judge", "b")
    assert solver.allowed_tools(["judge", "one"]) == []
    assert solver.tool_choice(["judge", "one"]) == ("none", None)
    error = solver.check_call("one", ["judge", "one"])
    assert error is not None and "allow no tool call" in error


# -- parent_last_tool ------------------------------------------------------------------------

def test_parent_rule_gates_children_on_the_last_call() -> None:
    solver = ToolRulesSolver([ParentToolRule(tool_name="login", children=["buy", "sell"])])
    tools = ["login", "buy", "sell", "browse"]
    assert solver.allowed_tools(tools) == ["login", "browse"]
    assert solver.check_call("buy", tools) is not None
    solver.record_call("login", "ok")
    # Letta: right after the parent, only its children are allowed (and a call is forced).
    assert solver.allowed_tools(tools) == ["buy", "sell"]
    assert solver.tool_choice(tools) == ("required", None)
    solver.record_call("buy", "ok")
    assert solver.allowed_tools(tools) == ["login", "browse"]


# -- max_count_per_step ----------------------------------------------------------------------

def test_max_count_limits_calls_per_run_and_resets_on_new_run() -> None:
    solver = ToolRulesSolver([MaxCountPerStepToolRule(tool_name="search", max_count_limit=2)])
    tools = ["search", "answer"]
    for _ in range(2):
        assert solver.check_call("search", tools) is None
        solver.start_step()  # Letta counts across the run's model calls, not per call
        solver.record_call("search", "hit")
    assert solver.allowed_tools(tools) == ["answer"]
    assert solver.tool_choice(tools) == ("auto", None)  # a limit never forces a call
    solver.start_run()
    assert solver.allowed_tools(tools) == tools


# -- required_before_exit --------------------------------------------------------------------

def test_required_before_exit_reminds_a_few_times_then_gives_up() -> None:
    solver = ToolRulesSolver([RequiredBeforeExitToolRule(tool_name="save"),
                              RequiredBeforeExitToolRule(tool_name="unattached")],
                             max_exit_reminders=2)
    tools = ["save", "chat"]
    assert solver.missing_before_exit(tools) == ["save"]  # unattached tools are not required
    reminders = [solver.exit_reminder(tools) for _ in range(3)]
    assert reminders[0] is not None and "save" in reminders[0]
    assert reminders[1] is not None
    assert reminders[2] is None  # budget spent: the loop must stop
    solver.record_call("save", "ok")
    assert solver.missing_before_exit(tools) == []


def test_exit_reminder_is_none_when_nothing_is_missing() -> None:
    solver = ToolRulesSolver([RequiredBeforeExitToolRule(tool_name="save")])
    solver.record_call("save", "ok")
    assert solver.exit_reminder(["save"]) is None


# -- prompt ----------------------------------------------------------------------------------

def test_render_prompt_is_empty_without_rules_or_with_only_approval_rules() -> None:
    assert ToolRulesSolver([]).render_prompt() == ""
    assert ToolRulesSolver([RequiresApprovalToolRule(tool_name="pay")]).render_prompt() == ""


def test_render_prompt_lists_rules_and_uses_letta_style_templates() -> None:
    solver = ToolRulesSolver([
        ChildToolRule(tool_name="plan", children=["act", "ask"]),
        {"type": "parent_last_tool", "tool_name": "login", "children": ["buy", "sell"],
         "prompt_template": "<tool_rule>{{ children | join(' or ') }} need {{tool_name}}; "
                            "{{ unknown }}</tool_rule>"},
    ])
    prompt = solver.render_prompt()
    assert prompt.startswith("<tool_usage_rules>\n") and prompt.endswith("</tool_usage_rules>")
    assert "After using plan, you must use one of these tools: act, ask" in prompt
    assert "<tool_rule>buy or sell need login; {{ unknown }}</tool_rule>" in prompt


# -- state -----------------------------------------------------------------------------------

def test_state_survives_json_and_a_new_solver() -> None:
    rules = load_af_rules("outreach_workflow_agent.af")
    solver = ToolRulesSolver(rules)
    solver.record_call("retrieve_candidate", '{"name": "Ada"}')
    solver.record_call("evaluate_candidate", "True")
    state = json.loads(json.dumps(solver.to_state()))
    resumed = ToolRulesSolver.from_state(rules, state)
    assert resumed.history == ["retrieve_candidate", "evaluate_candidate"]
    assert resumed.tool_choice(OUTREACH_TOOLS) == ("required", "send_email")


def test_from_state_rejects_a_corrupt_history() -> None:
    with pytest.raises(ConfigError, match=r"state\.history"):
        ToolRulesSolver.from_state([], {"history": [1, 2]})
