"""The rules solver against a real Agent File's workflow, and its answers on random rule sets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateloop.tools.rules import ToolRulesSolver
from test_rules import OUTREACH_TOOLS, load_af_rules

# -- the outreach workflow Agent File --------------------------------------------------------

@pytest.mark.parametrize(("verdict", "final_tool"), [("True", "send_email"),
                                                     ("false", "reject")])
def test_outreach_workflow_follows_its_rules(verdict: str, final_tool: str) -> None:
    solver = ToolRulesSolver(load_af_rules("outreach_workflow_agent.af"))
    path = [("retrieve_candidate", '{"name": "Ada", "skills": ["python"]}'),
            ("evaluate_candidate", verdict),
            (final_tool, "done")]
    for tool_name, output in path:
        # Each step allows exactly the next tool of the path, and forces it by name.
        assert solver.allowed_tools(OUTREACH_TOOLS) == [tool_name]
        assert solver.tool_choice(OUTREACH_TOOLS) == ("required", tool_name)
        assert solver.check_call(tool_name, OUTREACH_TOOLS) is None
        assert not solver.is_exit(tool_name) or tool_name == final_tool
        solver.record_call(tool_name, output)
    assert solver.is_exit(final_tool)
    assert solver.disables_parallel_calls


def test_outreach_workflow_flags_out_of_order_calls() -> None:
    solver = ToolRulesSolver(load_af_rules("outreach_workflow_agent.af"))
    for early in ("evaluate_candidate", "send_email", "reject"):
        error = solver.check_call(early, OUTREACH_TOOLS)
        assert error is not None and "valid tools now: retrieve_candidate" in error
    solver.record_call("retrieve_candidate", "{}")
    error = solver.check_call("send_email", OUTREACH_TOOLS)
    assert error is not None and "valid tools now: evaluate_candidate" in error
    solver.record_call("evaluate_candidate", "True")
    error = solver.check_call("reject", OUTREACH_TOOLS)
    assert error is not None and "valid tools now: send_email" in error


# -- properties ------------------------------------------------------------------------------

TOOL_NAMES = ["a", "b", "c", "d", "e"]
names = st.sampled_from(TOOL_NAMES)
outputs = st.sampled_from(["true", "False", "1", "2.5", "x", '{"k": 1}', ""]) | st.none()
rule_dicts = st.one_of(
    st.builds(lambda t: {"type": "run_first", "tool_name": t}, names),
    st.builds(lambda t: {"type": "exit_loop", "tool_name": t}, names),
    st.builds(lambda t: {"type": "continue_loop", "tool_name": t}, names),
    st.builds(lambda t, c: {"type": "constrain_child_tools", "tool_name": t, "children": c},
              names, st.lists(names, max_size=3)),
    st.builds(lambda t, m, d, r: {"type": "conditional", "tool_name": t,
                                  "child_output_mapping": m, "default_child": d,
                                  "require_output_mapping": r},
              names, st.dictionaries(st.sampled_from(["True", "1", "2.5", "x"]), names,
                                     min_size=1), names | st.none(), st.booleans()),
    st.builds(lambda t, c: {"type": "parent_last_tool", "tool_name": t, "children": c},
              names, st.lists(names, max_size=3)),
    st.builds(lambda t, n: {"type": "max_count_per_step", "tool_name": t,
                            "max_count_limit": n}, names, st.integers(0, 3)),
    st.builds(lambda t: {"type": "required_before_exit", "tool_name": t}, names),
    st.builds(lambda t: {"type": "requires_approval", "tool_name": t}, names),
)


@settings(max_examples=300, deadline=None)
@given(rules=st.lists(rule_dicts, max_size=6),
       available=st.lists(names, unique=True),
       calls=st.lists(st.tuples(names, outputs), max_size=8))
def test_solver_answers_stay_consistent(rules: list[dict[str, Any]], available: list[str],
                                        calls: list[tuple[str, str | None]]) -> None:
    solver = ToolRulesSolver(rules)
    for tool_name, output in calls:
        allowed = solver.allowed_tools(available)
        assert allowed == [t for t in available if t in allowed]  # subset, in order
        choice, forced = solver.tool_choice(available)
        assert (choice == "none") == (not allowed)
        assert forced is None or (choice == "required" and allowed == [forced])
        for candidate in TOOL_NAMES:
            error = solver.check_call(candidate, available)
            assert (error is None) == (candidate in allowed)
        # A state round-trip through JSON must not change any answer.
        clone = ToolRulesSolver.from_state(rules, json.loads(json.dumps(solver.to_state())))
        assert clone.allowed_tools(available) == allowed
        if solver.check_call(tool_name, available) is None:
            solver.record_call(tool_name, output)
