"""Agents talking to agents with Letta's multi-agent tools, on the scripted model and real
SQLite: the receiver's turn is a real run of it, replies reach the sender, tags choose the
receivers, and waits that would deadlock or last too long end with an error."""

from __future__ import annotations

import asyncio
import gc

import pytest

from stateloop import Agent, tool
from stateloop.live_agents import live_agents_of
from stateloop.testing import ScriptedModel, call, reply

WAIT = "send_message_to_agent_and_wait_for_reply"
ASYNC = "send_message_to_agent_async"
TAGS = "send_message_to_agents_matching_tags"
BOUND = 30  # a deadlock guard far above any run here, far below the reply timeout


@pytest.fixture(autouse=True)
def long_reply_timeout(monkeypatch):
    monkeypatch.setenv("STATELOOP_AGENT_REPLY_TIMEOUT", "300")


async def make(store, script, **options) -> Agent:
    options.setdefault("include_multi_agent_tools", True)
    model = script if isinstance(script, ScriptedModel) else ScriptedModel(script)
    return await Agent.acreate(model, store=store, system="You are helpful.",
                               **options)


def last_tool_result(model: ScriptedModel, request: int = -1) -> str:
    tool_messages = [m for m in model.requests[request].messages if m.role == "tool"]
    return tool_messages[-1].text


def gated(gate: asyncio.Event):
    @tool
    async def wait_for_gate() -> str:
        """Wait until the test opens the gate."""
        await gate.wait()
        return "gate open"

    return wait_for_gate


async def test_the_multi_agent_tools_are_attached_on_request(store):
    plain = await make(store, [], include_multi_agent_tools=False)
    chatty = await make(store, [])
    assert WAIT not in plain.tools
    assert {WAIT, ASYNC, TAGS} <= set(chatty.tools)
    assert chatty.tools[WAIT].spec().parameters["required"] == ["message", "other_agent_id"]
    loaded = await Agent.aload(chatty.id, store=store, model=ScriptedModel([]))
    assert {WAIT, ASYNC, TAGS} <= set(loaded.tools)


async def test_ping_pong_a_fact_through_wait_for_reply(store):
    keeper = await make(store, lambda request: reply("The launch code is 4217."),
                        name="keeper", include_multi_agent_tools=False)
    asker_script: list = []
    asker_model = ScriptedModel(asker_script)
    asker = await make(store, asker_model, name="asker")
    asker_script += [call(WAIT, message="What is the launch code?",
                                other_agent_id=keeper.id),
                           reply("Keeper says 4217.")]

    result = await asyncio.wait_for(asker.run("Find the launch code."), BOUND)

    assert result.output == "Keeper says 4217."
    assert "The launch code is 4217." in last_tool_result(asker_model)
    assert keeper.id in last_tool_result(asker_model)
    received = keeper.model.requests[0].messages[-1]
    assert received.role == "user"
    assert received.text.startswith(f"[Incoming message from agent with ID '{asker.id}' - "
                                    "your response will be delivered to the sender]")
    assert received.text.endswith("What is the launch code?")
    # The receiver's turn was a real run of it: stored, with its stop reason.
    runs = await store.list_runs(keeper.id)
    assert [run.stop_reason for run in runs] == ["end_turn"]
    reloaded = await Agent.aload(keeper.id, store=store, model=ScriptedModel([]))
    assert any(m.metadata.get("sender_agent_id") == asker.id for m in reloaded.messages)


async def test_an_agent_is_found_live_or_loaded_once(store):
    other = await Agent.acreate("openai/gpt-4o-mini", store=store)
    asker = await make(store, [])
    directory = live_agents_of(asker)
    assert await directory.agent(other.id) is other  # the live object, not a second one
    other_id = other.id
    del other
    gc.collect()
    loaded = await directory.agent(other_id)
    assert loaded.id == other_id
    assert await directory.agent(other_id) is loaded
    with pytest.raises(Exception, match="not found"):
        await directory.agent("agent-missing")


async def test_async_send_returns_at_once_and_the_receiver_runs(store):
    gate = asyncio.Event()
    receiver = await make(store, [call("wait_for_gate"), reply("noted"), reply("later")],
                          tools=[gated(gate)], include_multi_agent_tools=False)
    sender_script: list = []
    sender_model = ScriptedModel(sender_script)
    sender = await make(store, sender_model)
    sender_script += [call(ASYNC, message="FYI: the build is green.",
                                 other_agent_id=receiver.id), reply("told them")]

    result = await asyncio.wait_for(sender.run("Tell the receiver."), BOUND)

    assert result.output == "told them"
    assert last_tool_result(sender_model) == "Successfully sent message"
    assert not gate.is_set()  # the receiver's run is still waiting: the sender did not
    gate.set()
    await asyncio.wait_for(receiver.run("anything else?"), BOUND)  # queued behind it
    texts = [m.text for m in receiver.messages]
    assert any("one-way notification" in t and "FYI: the build is green." in t for t in texts)
    assert texts.index("noted") < texts.index("anything else?")


async def test_tags_broadcast_reaches_exactly_the_matching_agents(store):
    def answers(name):
        return lambda request: reply(f"{name} here")

    sender_script: list = []
    sender_model = ScriptedModel(sender_script)
    sender = await make(store, sender_model, tags=["team", "red"])
    agents = {name: await make(store, answers(name), tags=tags, name=name,
                               include_multi_agent_tools=False)
              for name, tags in {"red": ["team", "red"], "blue": ["team", "blue", "x"],
                                 "plain": ["team"], "outsider": ["red", "blue"]}.items()}
    sender_script += [call(TAGS, message="Status?", match_all=["team"],
                                 match_some=["red", "blue"]), reply("done")]

    await asyncio.wait_for(sender.run("Ask the team."), BOUND)

    reached = {name for name, agent in agents.items() if agent.model.requests}
    assert reached == {"red", "blue"}  # not the sender, not "plain", not "outsider"
    result = last_tool_result(sender_model)
    for name in ("red", "blue"):
        assert f"{name} here" in result and agents[name].id in result
    for name in ("plain", "outsider"):
        assert agents[name].id not in result


async def test_tags_with_match_all_only(store):
    sender_script: list = []
    sender_model = ScriptedModel(sender_script)
    sender = await make(store, sender_model, tags=["ops"])
    ops = await make(store, lambda r: reply("ops ok"), tags=["ops", "db"],
                     include_multi_agent_tools=False)
    other = await make(store, lambda r: reply("nope"), tags=["db"],
                       include_multi_agent_tools=False)
    sender_script += [call(TAGS, message="ping", match_all=["ops", "db"], match_some=[]),
                            reply("done")]
    await asyncio.wait_for(sender.run("go"), BOUND)
    assert ops.model.requests and not other.model.requests
    assert "ops ok" in last_tool_result(sender_model)


def _asks(target: Agent | None, then: str):
    """A script: ask ``target`` (set later) once, then reply with what came back."""
    box: dict[str, Agent] = {}

    def script(request):
        if request.messages[-1].role == "tool":
            return reply(f"{then}: {request.messages[-1].text}")
        return call(WAIT, message="Are you there?", other_agent_id=box["target"].id)

    return box, script


async def test_a_two_agent_cycle_ends_with_an_error_at_once(store):
    box_a, script_a = _asks(None, "A got")
    box_b, script_b = _asks(None, "B got")
    a = await make(store, script_a, name="A")
    b = await make(store, script_b, name="B")
    box_a["target"], box_b["target"] = b, a

    result = await asyncio.wait_for(a.run("start"), BOUND)

    # B's wait on A was refused (A waits on B); B answered with the refusal, A got that.
    b_result = last_tool_result(b.model)
    assert "cannot wait for a reply" in b_result and f"{b.id} -> {a.id} -> {b.id}" in b_result
    assert result.stop_reason == "end_turn"
    assert "B got" in result.output and "cannot wait" in result.output


async def test_a_three_agent_cycle_ends_with_an_error_at_once(store):
    boxes = [_asks(None, name) for name in ("A got", "B got", "C got")]
    a, b, c = [await make(store, script) for _, script in boxes]
    boxes[0][0]["target"], boxes[1][0]["target"], boxes[2][0]["target"] = b, c, a

    result = await asyncio.wait_for(a.run("start"), BOUND)

    assert f"{c.id} -> {a.id} -> {b.id} -> {c.id}" in last_tool_result(c.model)
    assert result.output.startswith("A got") and "cannot wait" in result.output


async def test_two_independent_runs_waiting_on_each_other_do_not_deadlock(store):
    box_a, script_a = _asks(None, "A got")
    box_b, script_b = _asks(None, "B got")
    a = await make(store, script_a)
    b = await make(store, script_b)
    box_a["target"], box_b["target"] = b, a

    results = await asyncio.wait_for(asyncio.gather(a.run("go"), b.run("go")), BOUND)

    assert all(r.stop_reason == "end_turn" for r in results)
    outputs = " ".join(r.output for r in results)
    assert "cannot wait for a reply" in outputs  # exactly one wait closed the cycle


async def test_a_reply_that_takes_too_long_is_an_error_and_the_run_goes_on(store, monkeypatch):
    monkeypatch.setenv("STATELOOP_AGENT_REPLY_TIMEOUT", "0.2")
    gate = asyncio.Event()
    slow = await make(store, [call("wait_for_gate"), reply("finally"), reply("again")],
                      tools=[gated(gate)], include_multi_agent_tools=False)
    asker_script: list = []
    asker_model = ScriptedModel(asker_script)
    asker = await make(store, asker_model)
    asker_script += [call(WAIT, message="quick?", other_agent_id=slow.id),
                           reply("gave up")]

    result = await asyncio.wait_for(asker.run("ask"), BOUND)

    assert result.output == "gave up"
    timed_out = [m for m in asker_model.requests[-1].messages if m.role == "tool"][-1]
    assert timed_out.is_error and "did not reply within 0.2 seconds" in timed_out.text
    gate.set()
    await asyncio.wait_for(slow.run("still there?"), BOUND)
    texts = [m.text for m in slow.messages]
    assert texts.index("finally") < texts.index("still there?")


async def test_unknown_receiver_and_bad_timeout_are_errors_for_the_model(store, monkeypatch):
    script = [call(WAIT, message="hi", other_agent_id="agent-nobody"),
              call(ASYNC, message="hi", other_agent_id="agent-nobody"), reply("ok")]
    model = ScriptedModel(script)
    agent = await make(store, model)
    await asyncio.wait_for(agent.run("go"), BOUND)
    assert "agent with id 'agent-nobody' not found" in last_tool_result(model, 1)
    assert "agent with id 'agent-nobody' not found" in last_tool_result(model, 2)
    script += [call(WAIT, message="hi", other_agent_id=agent.id), reply("ok")]
    await asyncio.wait_for(agent.run("myself?"), BOUND)  # its own queue is held by this run
    assert f"({agent.id} -> {agent.id})" in last_tool_result(model)
    monkeypatch.setenv("STATELOOP_AGENT_REPLY_TIMEOUT", "soon")
    script += [call(WAIT, message="hi", other_agent_id="agent-nobody"), reply("ok")]
    await asyncio.wait_for(agent.run("again"), BOUND)
    assert "STATELOOP_AGENT_REPLY_TIMEOUT must be a positive number" in last_tool_result(model)
