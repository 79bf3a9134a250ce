"""Conversations: several threads of one agent, each with its own transcript, queue, approvals
and compaction, sharing the agent's blocks, tools and store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from killed_child import kill_when_hanging
from stateloop import Agent, Approval, Block, ConfigError, tool
from stateloop.errors import AgentBusyError
from stateloop.llm.base import ModelRequest
from stateloop.store import NotFoundError
from stateloop.testing import ScriptedModel, assert_transcript_valid, call, reply

started: dict[str, asyncio.Event] = {}


@tool
async def slow(tag: str) -> str:
    """Wait until the other thread's call has started too."""
    started.setdefault(tag, asyncio.Event()).set()
    other = "b" if tag == "a" else "a"
    try:
        await asyncio.wait_for(started.setdefault(other, asyncio.Event()).wait(), 5)
    except TimeoutError:
        return "alone"
    return "together"


@tool
async def hang() -> str:
    """Does not return within a test."""
    await asyncio.sleep(60)
    return "late"


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch."""
    return f"launched at {target}"


def last_text(request: ModelRequest) -> str:
    return request.messages[-1].text


def echo(request: ModelRequest):
    """Each user message is answered with a call to the tool it names (``slow a``,
    ``launch x``, ``remember X``), then with the tool's result."""
    last = request.messages[-1]
    if last.role == "tool":
        return reply(f"done: {last.text}")
    words = last.text.split()
    if words[0] == "slow":
        return call("slow", tag=words[1])
    if words[0] == "launch":
        return call("launch", target=words[1])
    if words[0] == "hang":
        return call("hang")
    if words[0] == "search":
        return call("conversation_search", query=words[1])
    if words[0] == "remember":
        return call("memory_replace", label=words[1], old_string=words[2],
                    new_string=words[3])
    return reply(f"you said {last.text}")


def system_of(request: ModelRequest) -> str:
    return request.messages[0].text


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agents.db'}"


@pytest.fixture(params=["memory", "stored"])
def store(request, db):
    return None if request.param == "memory" else db


def make_agent(store, **options) -> Agent:
    options.setdefault("tools", [slow, launch])
    options.setdefault("blocks", [Block("human", "Name: Ada"), Block("persona", "Calm")])
    return Agent(model=ScriptedModel(echo), system="sys", store=store, **options)


async def test_two_conversations_of_one_agent_run_at_once(store):
    started.clear()
    agent = make_agent(store)
    one, two = await agent.aconversation(), await agent.aconversation()
    a, b = await asyncio.gather(one.run("slow a"), two.run("slow b"))
    assert a.output == b.output == "done: together"  # neither waited for the other
    for thread in (one, two):
        assert_transcript_valid(thread.messages)
        assert [m.role for m in thread.messages] == ["system", "user", "assistant", "tool",
                                                     "assistant"]
    assert "slow a" in one.messages[1].text and "slow b" in two.messages[1].text
    assert len(agent.messages) == 1  # the default thread saw none of it


async def test_one_conversation_runs_while_another_waits_for_approval(store):
    agent = make_agent(store)
    one, two = await agent.aconversation(), await agent.aconversation()
    paused = await one.run("launch moon")
    assert paused.stop_reason == "requires_approval"
    assert (await two.run("hello")).output == "you said hello"
    assert (await agent.run("hi")).output == "you said hi"
    done = await one.run(approvals=[Approval(paused.pending_approvals[0].id)])
    assert done.output == "done: launched at moon"
    assert two.pending_approval is None and agent.pending_approval is None
    assert_transcript_valid(one.messages)


async def test_a_block_edit_reaches_the_other_thread_but_not_an_isolated_block(store):
    agent = make_agent(store)
    one = await agent.aconversation()
    two = await agent.aconversation(isolated_block_labels=["persona"])
    await one.run("remember human Ada Grace")
    await one.run("remember persona Calm Bold")
    await two.run("hi")
    model = agent.model
    assert isinstance(model, ScriptedModel)
    seen = system_of(model.requests[-1])
    assert "Name: Grace" in seen and "Calm" in seen and "Bold" not in seen
    await agent.run("hi")
    seen = system_of(model.requests[-1])
    assert "Name: Grace" in seen and "Bold" in seen
    await two.run("remember persona Calm Quiet")
    assert [b.value for b in agent.blocks] == ["Name: Grace", "Bold"]
    assert [b.value for b in two.blocks] == ["Name: Grace", "Quiet"]


async def test_recall_searches_the_thread_it_runs_in(store):
    agent = make_agent(store, tools=[slow, launch, "conversation_search"])
    one, two = await agent.aconversation(), await agent.aconversation()
    await one.run("pineapple belongs on pizza")
    await agent.run("pineapple grows in the default thread")
    mine, theirs, own = (await one.run("search pineapple"), await two.run("search pineapple"),
                         await agent.run("search pineapple"))
    assert "pizza" in mine.output and "default thread" not in mine.output
    assert "pizza" not in theirs.output and "default thread" not in theirs.output
    assert "default thread" in own.output and "pizza" not in own.output
    if store is not None:  # agent-wide on request: the store's own search
        hits = await agent.store.search_messages(agent.id, "pineapple")
        texts = " ".join(hit.message.text for hit in hits)
        assert "pizza" in texts and "default thread" in texts


async def test_compaction_in_one_thread_leaves_the_other_as_it_was(store):
    agent = make_agent(store, compaction="sliding_window")
    one, two = await agent.aconversation(), await agent.aconversation()
    for i in range(6):
        await one.run(f"first thread message {i} " + "words " * 40)
        await two.run(f"second thread message {i}")
    before = [m.id for m in two.messages]
    event = await one.compact()
    assert event is not None and event.messages_evicted > 0
    assert [m.id for m in two.messages] == before
    assert one.context_overview().num_messages < two.context_overview().num_messages


async def test_fork_copies_the_transcript_up_to_a_message(store):
    agent = make_agent(store)
    await agent.run("first")
    await agent.run("second")
    cut = agent.messages[2]  # the answer to "first"
    fork = agent.fork(up_to=cut.id) if store is None else await agent.afork(up_to=cut.id)
    assert [m.text for m in fork.messages[1:]] == ["first", "you said first"]
    assert not {m.id for m in fork.messages} & {m.id for m in agent.messages}
    await fork.run("third")
    assert [m.text for m in agent.messages[1:]][-1] == "you said second"
    with pytest.raises(ConfigError):
        await agent.afork(up_to="message-nope")


async def test_cancel_stops_one_thread_only(store):
    agent = make_agent(store)
    one, two = await agent.aconversation(), await agent.aconversation()

    hanging = asyncio.create_task(one.run("hang", tools=[hang]))
    for _ in range(500):
        if one.running:
            break
        await asyncio.sleep(0.01)
    assert one.running and not two.running and not agent.running
    one.cancel()
    result = await hanging
    assert result.stop_reason == "cancelled"
    assert (await two.run("still here")).output == "you said still here"


async def test_deleting_a_conversation_deletes_its_messages_only(db):
    agent = make_agent(db)
    await agent.run("mine")
    thread = await agent.aconversation(isolated_block_labels=["human"])
    await thread.run("theirs")
    store = agent.store
    assert store is not None
    ids = {m.id for m in thread.messages}
    isolated = thread.blocks[0].id
    running = asyncio.create_task(thread.run("hang", tools=[hang]))
    for _ in range(500):
        if thread.running:
            break
        await asyncio.sleep(0.01)
    with pytest.raises(AgentBusyError):
        await agent.delete_conversation(thread.key)
    thread.cancel()
    await running
    await agent.delete_conversation(thread.key)
    kept = {m.id for m in await store.list_messages(agent.id)}
    assert not ids & kept and {m.id for m in agent.messages} <= kept
    with pytest.raises(NotFoundError):
        await store.get_conversation(thread.key)
    with pytest.raises(NotFoundError):
        await store.get_block(isolated)
    assert [b.value for b in await store.list_blocks(agent.id)] == ["Name: Ada", "Calm"]


async def test_conversations_come_back_after_load(db):
    agent = make_agent(db)
    one = await agent.aconversation(summary="phone", isolated_block_labels=["persona"])
    await one.run("remember persona Calm Bold")
    paused = await one.run("launch moon")
    await agent.run("hi")
    again = await Agent.aload(agent.id, store=db, model=ScriptedModel(echo),
                              tools=[slow, launch])
    back = await again.aconversation(one.key)
    assert back.summary == "phone"
    assert [m.to_dict() for m in back.messages] == [m.to_dict() for m in one.messages]
    assert [m.id for m in again.messages] == [m.id for m in agent.messages]
    assert [b.value for b in back.blocks] == ["Name: Ada", "Bold"]
    assert [b.value for b in again.blocks] == ["Name: Ada", "Calm"]
    assert back.pending_approval is not None
    done = await back.run(approvals=[Approval(paused.pending_approvals[0].id)])
    assert done.output == "done: launched at moon"
    assert_transcript_valid(back.messages)


def test_a_conversation_killed_in_a_tool_is_repaired_at_load(db, tmp_path):
    marker = tmp_path / "hanging"
    code = f"""
        import asyncio, pathlib, sys
        sys.path.insert(0, "tests")
        from test_conversations import echo, slow, launch
        from stateloop import Agent, Block, tool
        from stateloop.testing import ScriptedModel

        @tool
        async def hang() -> str:
            '''Never returns.'''
            pathlib.Path({str(marker)!r}).write_text(thread.key)
            await asyncio.sleep(600)
            return "late"

        async def main():
            global thread
            agent = await Agent.acreate(ScriptedModel(echo), system="sys",
                                        store={db!r}, name="crash", tools=[slow, launch, hang],
                                        blocks=[Block("human", "Name: Ada")])
            await agent.run("before")
            thread = await agent.aconversation()
            await thread.run("first")
            await thread.run("hang")

        asyncio.run(main())
    """
    kill_when_hanging(code, marker)
    key = marker.read_text()

    @tool
    async def hang() -> str:
        """Never returns."""
        return "unused"

    async def check() -> None:
        agent = await Agent.aload("crash", store=db, model=ScriptedModel(echo),
                                  tools=[slow, launch, hang])
        assert [m.text for m in agent.messages[1:]] == ["before", "you said before"]
        thread = await agent.aconversation(key)
        assert_transcript_valid(thread.messages)
        # The step in flight is lost (DESIGN invariant 3); the steps before it are kept.
        assert [m.text for m in thread.messages[1:]] == ["first", "you said first"]
        assert (await thread.run("again")).output == "you said again"
        runs = await agent.store.list_runs(agent.id)
        assert any(r.status == "failed" for r in runs)

    asyncio.run(check())


def test_unknown_conversations_and_blocks_are_refused():
    agent = make_agent(None)
    with pytest.raises(ConfigError):
        agent.conversation("conv-nope")
    with pytest.raises(ConfigError, match="no blocks labelled"):
        agent.conversation(isolated_block_labels=["nope"])
    thread = agent.conversation(summary="s")
    assert agent.conversation(thread.key) is thread
    assert thread.id == agent.id and thread.conversation_id == thread.key
    assert agent.conversation_id is None
