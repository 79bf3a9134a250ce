"""Sleep-time memory agents: the memory agent edits shared blocks in the background every
``sleeptime_agent_frequency`` turns, one run at a time, and its failures stay its own."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from killed_child import kill_when_hanging
from stateloop import Agent, Block
from stateloop.store import NotFoundError
from stateloop.testing import ScriptedModel, assert_transcript_valid, call, reply


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agents.db'}"


def echo(request):
    return reply(f"ok {len(request.messages)}")


def finish(request):
    return call("memory_finish_edits")


async def test_the_main_agent_sees_the_memory_agents_edit_at_its_next_step(db):
    main_model = ScriptedModel(echo)
    agent = await Agent.acreate(main_model, store=db, name="ada", system="Chat.",
                                blocks=[Block("human", "Name: Ada")], enable_sleeptime=True,
                                sleeptime_agent_frequency=2)
    assert agent.sleeptime is not None
    memory_model = ScriptedModel([call("memory_insert", label="human", new_string="Likes tea"),
                                  call("memory_finish_edits")])
    agent.sleeptime.model = memory_model
    await agent.run("hello")
    assert not agent.sleeptime.running and memory_model.requests == []  # one turn of two
    await agent.run("I like tea")
    upto = agent.messages[-1].id
    await agent.sleeptime.wait()

    store = agent.store
    assert store is not None
    assert (await store.get_agent_block(agent.id, "human")).value == "Name: Ada\nLikes tea"
    given = memory_model.requests[0].messages[-1].text
    assert "user: hello\nassistant: ok" in given and "user: I like tea" in given
    # The memory agent sees the shared block and its own persona, and memory tools only.
    memory = await agent.sleeptime.memory_agent()
    assert [b.label for b in memory.blocks] == ["memory_persona", "human"]
    assert set(memory.tools) == {"memory_insert", "memory_replace", "memory_rethink",
                                 "memory_finish_edits", "archival_memory_insert"}
    assert "memory_insert" not in agent.tools  # editing memory is the memory agent's job

    await agent.run("what do I like?")
    assert "Likes tea" in main_model.requests[-1].messages[0].text
    await agent.sleeptime.wait()  # the turn counter is stored in the background
    record = await store.get_agent(agent.id)
    assert record.enable_sleeptime
    group = await store.get_group(agent.sleeptime.link.group_id)  # Letta's sleeptime group
    assert (group.manager_type, group.manager_agent_id, group.agent_ids) == (
        "sleeptime", agent.id, [memory.id])
    assert (group.sleeptime_agent_frequency, group.turns_counter) == (2, 1)
    assert group.last_processed_message_id == upto
    runs = await store.list_runs(memory.id)
    assert [(r.status, r.stop_reason) for r in runs] == [("completed", "tool_rule")]


async def test_the_sleeptime_group_is_the_link_and_comes_back_on_load(db_url):
    db = db_url  # both dialects
    agent = await Agent.acreate(ScriptedModel(echo), store=db, name="kept",
                                blocks=[Block("human", "")], enable_sleeptime=True,
                                sleeptime_agent_frequency=3)
    assert agent.sleeptime is not None
    await agent.run("one")
    await agent.sleeptime.wait()
    store = agent.store
    assert store is not None
    group_id = agent.sleeptime.link.group_id
    assert [g.id for g in await store.list_groups(agent_id=agent.id)] == [group_id]
    assert (await store.managed_group(agent.id)).turns_counter == 1  # type: ignore[union-attr]
    await store.update_group(group_id, sleeptime_agent_frequency=2)  # as PATCH /v1/groups does

    memory_model = ScriptedModel(finish)
    again = await Agent.aload("kept", store=db, model=ScriptedModel(echo))
    assert again.sleeptime is not None and again.sleeptime.enabled
    assert again.sleeptime.link == agent.sleeptime.link.__class__(
        group_id, agent.sleeptime.link.memory_agent_id, 2, 1, None)
    again.sleeptime.model = memory_model
    await again.run("two")  # the second turn of two: the memory agent runs
    await again.sleeptime.wait()
    assert "user: one" in memory_model.requests[0].messages[-1].text
    assert (await store.get_group(group_id)).last_processed_message_id == again.messages[-1].id


async def test_turns_that_arrive_during_a_memory_run_are_covered_by_the_next(db):
    agent = await Agent.acreate(ScriptedModel(echo), store=db, name="busy",
                                blocks=[Block("human", "")], enable_sleeptime=True,
                                sleeptime_agent_frequency=1)
    assert agent.sleeptime is not None
    memory_model = ScriptedModel(finish, latency=0.3)
    agent.sleeptime.model = memory_model
    for n in range(4):
        await agent.run(f"turn {n}")
        assert agent.sleeptime.running  # the reply came back while the memory agent works
    await asyncio.gather(*(agent.run(f"turn {n}") for n in range(4, 12)))  # a burst
    await agent.sleeptime.wait()

    memory = await agent.sleeptime.memory_agent()
    store = agent.store
    assert store is not None
    runs = sorted(await store.list_runs(memory.id), key=lambda r: r.created_at)
    assert 2 <= len(runs) < 12  # turns were batched, not one run each
    for earlier, later in itertools.pairwise(runs):
        assert earlier.completed_at is not None and later.started_at is not None
        assert earlier.completed_at <= later.started_at  # never two at once
    given = "\n".join(r.messages[-1].text for r in memory_model.requests)
    for n in range(12):
        assert given.count(f"user: turn {n}\n") == 1  # every turn seen exactly once


async def test_a_crashing_memory_agent_leaves_the_main_agent_alone(db):
    main_model = ScriptedModel(echo)
    agent = await Agent.acreate(main_model, store=db, name="crash",
                                blocks=[Block("human", "x")], enable_sleeptime=True,
                                sleeptime_agent_frequency=1)
    assert agent.sleeptime is not None

    def explode(request):
        raise RuntimeError("memory model is broken")

    agent.sleeptime.model = ScriptedModel(explode)
    for n in range(3):
        result = await agent.run(f"turn {n}")
        assert result.stop_reason == "end_turn"
        await agent.sleeptime.wait()
    assert agent.sleeptime.last_error == "RuntimeError: memory model is broken"

    store = agent.store
    assert store is not None
    main_runs = await store.list_runs(agent.id)
    assert [(r.status, r.stop_reason) for r in main_runs] == [("completed", "end_turn")] * 3
    memory_runs = await store.list_runs(agent.sleeptime.link.memory_agent_id)
    assert [(r.status, r.stop_reason) for r in memory_runs] == [("failed", "error")] * 3
    assert "memory model is broken" in (memory_runs[0].error or "")
    assert (await store.get_agent_block(agent.id, "human")).value == "x"
    assert_transcript_valid(agent.messages)


async def test_an_agent_without_a_store_shares_its_blocks_in_memory():
    main_model = ScriptedModel(echo)
    agent = Agent(main_model, blocks=[Block("human", "")], enable_sleeptime=True,
                  sleeptime_agent_frequency=1)
    assert agent.sleeptime is not None
    agent.sleeptime.model = ScriptedModel([
        call("memory_rethink", label="human", new_memory="Name: Bo"),
        call("memory_finish_edits")])
    await agent.run("I am Bo")
    await agent.sleeptime.wait()
    assert agent.blocks[0].value == "Name: Bo"
    await agent.run("who am I?")
    assert "Name: Bo" in main_model.requests[-1].messages[0].text
    assert agent.sleeptime.last_error is None


async def test_a_bad_frequency_is_refused_before_anything_is_stored(db):
    from stateloop import ConfigError

    with pytest.raises(ConfigError, match="sleeptime_agent_frequency"):
        await Agent.acreate(ScriptedModel(echo), store=db, name="bad", enable_sleeptime=True,
                            sleeptime_agent_frequency=0)
    agent = await Agent.acreate(ScriptedModel(echo), store=db, name="good")
    store = agent.store
    assert store is not None
    with pytest.raises(NotFoundError):
        await store.get_agent("bad")


def test_a_kill_during_a_memory_run_leaves_both_agents_loadable(db, tmp_path):
    marker = tmp_path / "memory-started"
    kill_when_hanging(f"""
        import time
        from pathlib import Path
        from stateloop import Agent, Block
        from stateloop.testing import ScriptedModel, call, reply

        def hang(request):
            Path({str(marker)!r}).write_text("started")
            time.sleep(600)

        async def main():
            agent = await Agent.acreate(ScriptedModel([reply("hi")]), store={db!r},
                                        name="killed", blocks=[Block("human", "Ada")],
                                        enable_sleeptime=True, sleeptime_agent_frequency=1)
            agent.sleeptime.model = ScriptedModel(hang)
            await agent.run("hello")
            await agent.sleeptime.wait()

        import asyncio
        asyncio.run(main())
    """, marker)

    model = ScriptedModel([reply("back"), call("memory_finish_edits")])
    agent = Agent.load("killed", store=db, model=model)
    assert agent.sleeptime is not None
    memory_id = agent.sleeptime.link.memory_agent_id
    memory = Agent.load(memory_id, store=db, model=model)
    assert_transcript_valid(agent.messages)
    assert_transcript_valid(memory.messages)
    assert [b.label for b in memory.blocks] == ["memory_persona", "human"]

    async def go_on():
        store = agent.store
        assert store is not None
        runs = await store.list_runs(memory_id)
        assert [(r.status, r.stop_reason) for r in runs] == [("failed", "error")]
        await agent.run("still there?")
        await agent.sleeptime.wait()
        return await store.list_runs(memory_id)

    runs = asyncio.run(go_on())
    assert sorted(r.status for r in runs) == ["completed", "failed"]
    assert agent.sleeptime.last_error is None


def test_run_sync_returns_after_the_memory_run_it_started(db):
    agent = Agent(ScriptedModel(echo), store=db, name="sync", blocks=[Block("human", "")],
                  enable_sleeptime=True, sleeptime_agent_frequency=1)
    assert agent.sleeptime is not None
    agent.sleeptime.model = ScriptedModel([
        call("memory_replace", label="human", old_string="", new_string="x"),
        call("memory_insert", label="human", new_string="Sync"), call("memory_finish_edits")])
    assert agent.run_sync("hi").output.startswith("ok")
    assert agent.sleeptime.last_result is not None  # it ran to its end, not cancelled
    assert agent.sleeptime.last_error is None
    loaded = Agent.load("sync", store=db, model=ScriptedModel(echo))
    assert loaded.blocks[0].value == "Sync"
