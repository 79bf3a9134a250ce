"""Groups in the library: each manager type end to end on the scripted model, shared blocks,
per-agent event tags, and a group reloaded from a real SQLite store."""

from __future__ import annotations

import pytest

from stateloop import Agent, Block
from stateloop.errors import ConfigError
from stateloop.events import RunStart
from stateloop.groups import Dynamic, Group, RoundRobin, Supervisor
from stateloop.store.errors import NotFoundError
from stateloop.store.sql import open_store
from stateloop.testing import ScriptedModel, call, reply


def member(name: str, *replies: str, **options) -> Agent:
    return Agent(ScriptedModel([reply(text) for text in replies]), name=name,
                 system=f"You are {name}.", **options)


def inputs(agent: Agent) -> list[str]:
    """The text of every user message the agent's model was sent, in order."""
    model = agent.model
    assert isinstance(model, ScriptedModel)
    seen: list[str] = []
    for request in model.requests:
        for message in request.messages:
            if message.role == "user" and message.text not in seen:
                seen.append(message.text)
    return seen


async def test_round_robin_takes_turns_in_order_for_max_turns() -> None:
    ann, bob, cy = member("ann", "A1", "A2"), member("bob", "B1"), member("cy", "C1")
    group = Group([ann, bob, cy], manager=RoundRobin(max_turns=4))

    result = await group.run("hello all")

    assert [(m.name, m.text) for m in result.messages] == [
        (None, "hello all"), ("ann", "A1"), ("bob", "B1"), ("cy", "C1"), ("ann", "A2")]
    assert result.turns == 4 and result.stop_reason == "max_turns"
    # each member was given what it missed, never its own words
    assert inputs(bob) == ["hello all", "ann: A1"]
    assert inputs(ann) == ["hello all", "bob: B1", "cy: C1"]


async def test_round_robin_defaults_to_one_turn_per_member() -> None:
    group = Group([member("ann", "A1"), member("bob", "B1")])
    result = await group.run("hi")
    assert [m.text for m in result.messages] == ["hi", "A1", "B1"]
    assert result.stop_reason == "max_turns"


async def test_supervisor_routes_through_its_tool_and_answers() -> None:
    boss = Agent(ScriptedModel([call("send_message_to_all_agents_in_group", message="Sizes?"),
                                reply("Ann says 3, Bob says 5.")]), name="boss")
    ann, bob = member("ann", "3"), member("bob", "5")
    group = Group([ann, bob], manager=Supervisor(boss))

    result = await group.run("Ask the team for sizes")

    assert result.stop_reason == "end_turn"
    texts = [(m.name, m.text) for m in result.messages]
    assert texts[0] == (None, "Ask the team for sizes")
    assert texts[1] == ("boss", "Sizes?")
    assert sorted(texts[2:4]) == [("ann", "3"), ("bob", "5")]
    assert texts[4] == ("boss", "Ann says 3, Bob says 5.")
    assert inputs(ann) == ["Ask the team for sizes", "boss: Sizes?"]
    tool_result = next(m for m in boss.messages if m.role == "tool")
    assert '"reply": "3"' in tool_result.text and '"reply": "5"' in tool_result.text
    # the tool was offered for the group's run only
    assert "send_message_to_all_agents_in_group" not in boss.tools


async def test_dynamic_stops_at_the_termination_token() -> None:
    boss = Agent(ScriptedModel([reply("bob should answer")]), name="boss")
    ann, bob = member("ann"), member("bob", "All done. DONE!")
    group = Group([ann, bob], manager=Dynamic(boss, max_turns=5))

    result = await group.run("who knows?")

    assert result.stop_reason == "end_turn" and result.turns == 1
    assert [(m.name, m.text) for m in result.messages] == [
        (None, "who knows?"), ("bob", "All done. DONE!")]
    ask = inputs(boss)[0]
    assert "ann" in ask and "bob" in ask and "who knows?" in ask


async def test_dynamic_stops_after_max_turns_and_never_repeats_a_speaker() -> None:
    # the manager names both each time: the last named wins (as in Letta), and whoever
    # just spoke is not an option
    boss = Agent(ScriptedModel(lambda request: reply("ann and bob")), name="boss")
    ann, bob = member("ann", "A1"), member("bob", "B1", "B2")
    group = Group([ann, bob], manager=Dynamic(boss, termination_token="STOP", max_turns=3))

    result = await group.run("go")

    assert result.stop_reason == "max_turns" and result.turns == 3
    assert [m.name for m in result.messages[1:]] == ["bob", "ann", "bob"]


async def test_dynamic_manager_naming_nobody_ends_with_an_error() -> None:
    boss = Agent(ScriptedModel([reply("no idea")]), name="boss")
    group = Group([member("ann"), member("bob")], manager=Dynamic(boss))
    result = await group.run("go")
    assert result.stop_reason == "error" and "named none" in (result.error or "")


async def test_shared_blocks_reach_every_member() -> None:
    team = Block("team", "We ship on Friday.")
    ann, bob = member("ann", "ok"), member("bob", "ok")
    Group([ann, bob], shared_blocks=[team])
    for agent in (ann, bob):
        assert any(block is team for block in agent.blocks)
        assert "We ship on Friday." in agent.messages[0].text


async def test_events_are_tagged_with_the_agent_that_produced_them() -> None:
    ann, bob = member("ann", "A1"), member("bob", "B1")
    group = Group([ann, bob])

    events = [event async for event in group.stream("hi")]

    starts = [(e.agent_id, e.event.agent_id) for e in events if isinstance(e.event, RunStart)]
    assert starts == [(ann.id, ann.id), (bob.id, bob.id)]
    ends = [e.agent_name for e in events if e.type == "run_end"]
    assert ends == ["ann", "bob"]
    texts = {e.agent_name for e in events if e.type == "text_delta"}
    assert texts == {"ann", "bob"}


def test_bad_groups_are_refused_by_name() -> None:
    ann = member("ann")
    with pytest.raises(ConfigError, match="at least one agent"):
        Group([])
    with pytest.raises(ConfigError, match="must differ"):
        Group([ann, ann])
    with pytest.raises(ConfigError, match="max_turns"):
        RoundRobin(max_turns=0)
    with pytest.raises(ConfigError, match="manager agent cannot also be a member"):
        Group([ann], manager=Supervisor(ann))
    with pytest.raises(ConfigError, match="already has a block labelled 'human'"):
        Group([member("bob", blocks=[Block("human", "Bob")])], shared_blocks=[Block("human")])


async def test_a_stored_group_reloads_with_its_messages_and_shares_blocks(db_url: str
                                                                        ) -> None:
    store = await open_store(db_url)
    try:
        ann = await Agent.acreate(ScriptedModel([
            call("memory_replace", label="team", old_string="Friday", new_string="Monday"),
            reply("moved it")]), store=store, name="ann", blocks=[Block("human", "")])
        bob = await Agent.acreate(ScriptedModel([reply("B1")]), store=store, name="bob")
        team = Block("team", "We ship on Friday.")
        group = await Group.acreate([ann, bob], store=store, shared_blocks=[team],
                                    description="release crew")
        await group.run("when do we ship?")
        # ann's edit reached bob's next request through the shared block
        assert "We ship on Monday." in bob.model.requests[-1].messages[0].text  # type: ignore

        models = {"ann": ScriptedModel([reply("A2")]), "bob": ScriptedModel([reply("B2")])}

        async def load(agent_id: str) -> Agent:
            record = await store.get_agent(agent_id)
            return await Agent.aload(agent_id, store=store, model=models[record.name])

        again = await Group.aload(group.id, store=store, load_agent=load)
        assert again.record.agent_ids == [ann.id, bob.id]
        assert again.description == "release crew"
        assert again.record.shared_block_ids == [team.id]
        assert [m.text for m in again.messages] == ["when do we ship?", "moved it", "B1"]
        result = await again.run("and now?")
        assert [m.text for m in result.messages] == ["and now?", "A2", "B2"]
        # ann was given bob's reply from the first run, which she had not seen
        assert [m.text for m in models["ann"].requests[0].messages if m.role == "user"][-2:] \
            == ["bob: B1", "and now?"]

        await store.delete_agent(bob.id)
        assert (await store.get_group(group.id)).agent_ids == [ann.id]
        await store.delete_group(group.id)
        assert (await store.get_agent(ann.id)).name == "ann"
        with pytest.raises(NotFoundError):
            await store.get_group(group.id)
    finally:
        await store.close()
