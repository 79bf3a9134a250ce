"""Tool rules driving real runs: what is offered, forced, refused, and when a run stops."""

from __future__ import annotations

import json
import random

import pytest

from shared_fixtures import LETTA_AF
from stateloop import Agent, tool
from stateloop.testing import ScriptedModel, assert_transcript_valid, call, calls, reply
from stateloop.tools.source import tool_from_source

FIXTURES = LETTA_AF


@tool
def plan(goal: str) -> str:
    """Plan."""
    return f"plan for {goal}"


@tool
def act(step: str) -> str:
    """Act."""
    return f"did {step}"


@tool
def finish(summary: str) -> str:
    """Finish."""
    return "finished"


def run_with(script, rules, tools=(plan, act, finish), **options):
    model = ScriptedModel(script)
    agent = Agent(model=model, tools=list(tools), tool_rules=rules, **options)
    return agent, model


def offered(model, index):
    return [spec.name for spec in model.requests[index].tools]


async def test_run_first_is_forced_and_its_args_prefilled():
    rules = [{"type": "run_first", "tool_name": "plan", "args": {"goal": "prefilled"}}]
    agent, model = run_with([call("plan", goal="model's"), reply("ok")], rules)
    result = await agent.run("go")
    first = model.requests[0]
    assert offered(model, 0) == ["plan"]
    assert (first.tool_choice, first.forced_tool) == ("required", "plan")
    assert result.messages[2].text == "plan for prefilled"
    assert offered(model, 1) == ["plan", "act", "finish"]
    assert model.requests[1].tool_choice == "auto"


async def test_call_to_a_tool_not_allowed_is_refused_and_the_loop_goes_on():
    rules = [{"type": "run_first", "tool_name": "plan"}]
    agent, _ = run_with([call("act", step="jump the gun"), call("plan", goal="g"),
                         reply("ok")], rules)
    result = await agent.run("go")
    refused = result.messages[2]
    assert refused.is_error and "Cannot call act" in refused.text
    assert "valid tools now: plan" in refused.text
    assert result.messages[4].text == "plan for g"
    assert result.stop_reason == "end_turn"


async def test_exit_loop_stops_with_tool_rule():
    rules = [{"type": "exit_loop", "tool_name": "finish"}]
    agent, model = run_with([call("finish", summary="s"), reply("unreached")], rules)
    result = await agent.run("go")
    assert result.stop_reason == "tool_rule"
    assert "exit_loop" in (result.error or "")
    assert model.remaining == 1
    assert_transcript_valid(agent.messages)


async def test_exit_loop_tool_that_failed_does_not_stop():
    rules = [{"type": "exit_loop", "tool_name": "finish"}]
    agent, _ = run_with([call("finish"), reply("retry later")], rules)
    result = await agent.run("go")
    assert result.stop_reason == "end_turn"


async def test_constrain_child_tools():
    rules = [{"type": "constrain_child_tools", "tool_name": "plan", "children": ["act"],
              "child_arg_nodes": [{"name": "act", "args": {"step": "the planned step"}}]}]
    agent, model = run_with([call("plan", goal="g"), call("finish", summary="skip"),
                             call("act", step="mine"), reply("done")], rules)
    result = await agent.run("go")
    assert offered(model, 1) == ["act"]
    assert (model.requests[1].tool_choice, model.requests[1].forced_tool) == ("required", "act")
    tool_texts = [m.text for m in result.messages if m.role == "tool"]
    assert "Cannot call finish" in tool_texts[1]
    assert tool_texts[2] == "did the planned step"


async def test_parent_last_tool():
    rules = [{"type": "parent_last_tool", "tool_name": "plan", "children": ["act"]}]
    agent, model = run_with([call("act", step="early"), call("plan", goal="g"),
                             call("act", step="now"), reply("done")], rules)
    result = await agent.run("go")
    assert "act" not in offered(model, 0)
    assert "Cannot call act" in result.messages[2].text
    assert offered(model, 2) == ["act"]
    assert result.messages[6].text == "did now"


async def test_max_count_per_step():
    rules = [{"type": "max_count_per_step", "tool_name": "act", "max_count_limit": 2}]
    agent, model = run_with([call("act", step=str(i)) for i in range(3)] + [reply("done")],
                            rules)
    result = await agent.run("go")
    assert "act" in offered(model, 1) and "act" not in offered(model, 2)
    assert [m.is_error for m in result.messages if m.role == "tool"] == [False, False, True]


async def test_required_before_exit_reminds_then_succeeds():
    rules = [{"type": "required_before_exit", "tool_name": "finish"}]
    agent, _ = run_with([reply("bye"), call("finish", summary="s"), reply("bye")], rules)
    result = await agent.run("go")
    assert result.stop_reason == "end_turn"
    reminder = result.messages[2]
    assert reminder.role == "user" and "must call finish" in reminder.text
    assert result.steps == 3


async def test_required_before_exit_gives_up_with_a_clear_reason():
    rules = [{"type": "required_before_exit", "tool_name": "finish"}]
    agent, _ = run_with([reply("no")] * 5, rules)
    result = await agent.run("go")
    assert result.stop_reason == "tool_rule"
    assert "without calling finish" in (result.error or "")
    assert result.steps == 4  # the first stop and three reminders


async def test_continue_loop_keeps_a_heartbeat_agent_going():
    rules = [{"type": "continue_loop", "tool_name": "plan"}]
    agent, _ = run_with([call("plan", goal="g", request_heartbeat=False),
                             call("send_message", message="done")],
                            rules, agent_type="memgpt_agent")
    result = await agent.run("go")
    assert result.steps == 2 and result.output == "done"


async def test_rules_are_rendered_into_the_system_prompt_and_disable_parallel_calls():
    rules = [{"type": "exit_loop", "tool_name": "finish"}]
    agent, model = run_with([reply("hi")], rules)
    await agent.run("go")
    system_text = model.requests[0].messages[0].text
    assert "<tool_usage_rules>" in system_text and "finish" in system_text
    assert model.requests[0].parallel_tool_calls is False


async def test_approval_rule_alone_keeps_parallel_calls():
    rules = [{"type": "requires_approval", "tool_name": "finish"}]
    agent, model = run_with([reply("hi")], rules)
    await agent.run("go")
    assert model.requests[0].parallel_tool_calls is True


async def test_rules_run_calls_of_one_step_in_order_against_the_rules():
    rules = [{"type": "run_first", "tool_name": "plan"},
             {"type": "constrain_child_tools", "tool_name": "plan", "children": ["act"]}]
    agent, _ = run_with([calls(call("plan", goal="g"), call("finish", summary="x")),
                         reply("ok")], rules)
    result = await agent.run("go")
    texts = [m.text for m in result.messages if m.role == "tool"]
    assert texts[0] == "plan for g" and "Cannot call finish" in texts[1]


def load_outreach_agent_file():
    data = json.loads((FIXTURES / "outreach_workflow_agent.af").read_text())
    if isinstance(data, str):
        data = json.loads(data)
    tools = [tool_from_source(t["source_code"], t["json_schema"]) for t in data["tools"]]
    return data["agents"][0]["tool_rules"], tools


@pytest.mark.parametrize(("seed_outcome", "final_tool"), [(True, "send_email"),
                                                         (False, "reject")])
async def test_outreach_workflow_from_the_agent_file(seed_outcome, final_tool):
    rules, tools = load_outreach_agent_file()
    assert [r["type"] for r in rules] == ["run_first", "constrain_child_tools", "conditional",
                                         "exit_loop", "exit_loop"]
    # evaluate_candidate returns random.random() > 0.5: pick a seed giving the outcome wanted.
    seed = next(s for s in range(100) if (random.Random(s).random() > 0.5) == seed_outcome)
    random.seed(seed)
    script = [
        call("send_email", candidate_name="Ada", email_subject="Hi", email_content="..."),
        call("retrieve_candidate", candidate_name="Ada"),
        call("reject", candidate_name="Ada"),  # skipping the evaluation
        call("evaluate_candidate"),
        # The wrong branch first, then the right one.
        call("reject" if seed_outcome else "send_email", candidate_name="Ada",
             **({} if seed_outcome else {"email_subject": "Hi", "email_content": "..."})),
        call(final_tool, candidate_name="Ada",
             **({"email_subject": "Hi", "email_content": "Welcome"}
                if final_tool == "send_email" else {})),
        reply("unreached"),
    ]
    model = ScriptedModel(script)
    agent = Agent(model=model, tools=tools, tool_rules=rules)
    result = await agent.run("Process candidate Ada")
    assert result.stop_reason == "tool_rule"
    assert model.remaining == 1
    offered_per_step = [[s.name for s in r.tools] for r in model.requests]
    assert offered_per_step[0] == ["retrieve_candidate"]
    assert offered_per_step[1] == ["retrieve_candidate"]
    assert offered_per_step[2] == ["evaluate_candidate"]
    assert offered_per_step[3] == ["evaluate_candidate"]
    assert offered_per_step[4] == [final_tool]
    results = [(m.name, m.is_error) for m in result.messages if m.role == "tool"]
    assert results == [("send_email", True), ("retrieve_candidate", False), ("reject", True),
                       ("evaluate_candidate", False),
                       ("reject" if seed_outcome else "send_email", True),
                       (final_tool, False)]
    assert_transcript_valid(agent.messages)
