"""Persisted agents: create, load in another process, checkpoints, shared blocks, runs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import DIALECTS, database_url, raw_sql
from killed_child import kill_when_hanging
from stateloop import Agent, Approval, Block, ConfigError, tool
from stateloop.errors import AgentBusyError
from stateloop.store import (
    BlockLimitError,
    BlockRecord,
    DatabaseOpenError,
    DuplicateError,
    NotFoundError,
)
from stateloop.testing import ScriptedModel, assert_transcript_valid, call, reply
from store_trace import traced

ROOT = Path(__file__).resolve().parents[1]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch."""
    return f"launched at {target}"


@pytest.fixture(params=DIALECTS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return database_url(request.param, tmp_path, request)


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


async def test_a_persisted_agent_continues_after_load(db):
    agent = Agent(model=ScriptedModel([call("add", a=1, b=2), reply("3")]), tools=[add],
                  system="sys", blocks=[Block("human", "Name: Ada")], store=db, name="ada")
    await agent.run("1+2?")

    model = ScriptedModel([reply("Still here.")])
    again = await Agent.aload("ada", store=db, model=model, tools=[add])
    assert again.id == agent.id
    assert [m.to_dict() for m in again.messages] == [m.to_dict() for m in agent.messages]
    assert [b.value for b in again.blocks] == ["Name: Ada"]
    result = await again.run("Are you there?")
    assert result.output == "Still here."
    sent = [m.role for m in model.requests[0].messages]
    assert sent == ["system", "user", "assistant", "tool", "assistant", "user"]


def test_load_in_another_process(db):
    created = run_python(f"""
        from stateloop import Agent, Block, tool
        from stateloop.testing import ScriptedModel, call, reply

        @tool
        def add(a: int, b: int) -> int:
            '''Add.'''
            return a + b

        agent = Agent(model=ScriptedModel([call("add", a=20, b=22), reply("42")]), tools=[add],
                      blocks=[Block("human", "")], store={db!r}, name="calc")
        print(agent.run_sync("20+22?").output)
    """)
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "42"

    model = ScriptedModel([reply("It was 42.")])
    agent = Agent.load("calc", store=db, model=model, tools=[add])
    assert [m.text for m in agent.messages if m.role == "tool"] == ["42"]
    assert agent.run_sync("What was it?").output == "It was 42."
    assert set(agent.tools) == {"add", "memory_insert", "memory_replace", "conversation_search"}


async def test_missing_python_tool_is_named(db):
    Agent(model=ScriptedModel([]), tools=[add], store=db, name="needs-add")
    with pytest.raises(ConfigError, match="uses tools that were not given: add"):
        await Agent.aload("needs-add", store=db, model=ScriptedModel([]))


async def test_bad_input_is_refused_and_nothing_changes(db, tmp_path):
    Agent(model=ScriptedModel([]), store=db, name="taken")
    with pytest.raises(DuplicateError, match="an agent named 'taken' already exists"):
        Agent(model=ScriptedModel([]), store=db, name="taken")
    with pytest.raises(NotFoundError):
        await Agent.aload("nobody", store=db, model=ScriptedModel([]))
    (tmp_path / "not-a-db").write_text("plain text, not SQLite")
    with pytest.raises(DatabaseOpenError, match="not-a-db"):
        Agent(model=ScriptedModel([]), store=f"sqlite:///{tmp_path / 'not-a-db'}", name="x")
    with pytest.raises(ValueError, match="over its limit"):
        Agent(model=ScriptedModel([]), store=db, name="big",
              blocks=[Block("human", "x" * 5, limit=4)])
    with pytest.raises(BlockLimitError, match="over its limit of 4"):
        await (await _store(db)).create_block(BlockRecord("human", "x" * 5, limit=4))
    agents = await (await _store(db)).list_agents()
    assert [a.name for a in agents] == ["taken"]


async def _store(url: str):
    from stateloop.persistence import get_store

    return await get_store(url)


async def test_every_step_is_checkpointed_with_its_run(db):
    agent = Agent(model=ScriptedModel([call("add", a=1, b=1), call("add", a=2, b=2),
                                       reply("4")]), tools=[add], store=db, name="steps")
    result = await agent.run("go")
    store = agent.store
    assert store is not None
    run = await store.get_run(result.run_id)
    assert (run.status, run.stop_reason, run.step_count) == ("completed", "end_turn", 3)
    assert run.usage.output_tokens == result.usage.output_tokens
    steps = await store.list_steps(result.run_id)
    assert [s.index for s in steps] == [0, 1, 2]
    stored = await store.list_messages(agent.id, limit=100)
    assert [m.id for m in stored] == [m.id for m in agent.messages]
    record = await store.get_agent(agent.id)
    assert record.in_context_message_ids == [m.id for m in agent.messages]
    assert run.usage == result.usage


async def test_steps_that_only_append_leave_the_stored_context_list_alone(db):
    agent = Agent(model=ScriptedModel([call("add", a=1, b=1), reply("2"), reply("again"),
                                       reply("anew")]),
                  tools=[add], store=db, name="appends")

    def stored_list() -> list[str]:
        assert agent.store is not None
        return json.loads(raw_sql(agent.store, "SELECT in_context_message_ids FROM agents")
                          [0][0])

    await agent.run("go")
    await agent.run("more")
    assert stored_list() == []  # as created: each message since was appended
    store = agent.store
    assert store is not None
    assert (await store.get_agent(agent.id)).in_context_message_ids == [
        m.id for m in agent.messages]
    agent.reset()
    await agent.run("fresh")
    assert stored_list() == [m.id for m in agent.messages[:3]]  # rewritten once: it shrank
    loaded = await Agent.aload("appends", store=db, model=ScriptedModel([]), tools=[add])
    assert [m.id for m in loaded.messages] == [m.id for m in agent.messages]


async def test_memory_edits_are_persisted_with_their_step(db):
    block = Block("human", "Name: unknown")
    agent = Agent(model=ScriptedModel([call("memory_replace", label="human",
                                            old_string="unknown", new_string="Ada"),
                                       reply("ok")]), blocks=[block], store=db, name="mem")
    await agent.run("I'm Ada")
    store = agent.store
    assert store is not None
    assert (await store.get_agent_block(agent.id, "human")).value == "Name: Ada"
    again = await Agent.aload("mem", store=db, model=ScriptedModel([]))
    assert "Name: Ada" in again.messages[0].text


async def test_a_workflow_agent_clears_its_stored_buffer_with_the_run_end(db):
    agent = Agent(model=ScriptedModel([call("add", a=1, b=2), reply("3")]), tools=[add],
                  agent_type="workflow_agent", store=db, name="flow")
    store = agent.store
    assert store is not None
    if store.path is None:
        pytest.skip("the statement trace is sqlite3's")
    with traced(store) as statements:
        await agent.run("first")

    last = " ".join(statements[len(statements) - statements[::-1].index("BEGIN IMMEDIATE"):])
    assert "SET status='completed'" in last and "SET in_context_message_ids" in last  # together
    system = agent.messages[0]
    assert (await store.get_agent(agent.id)).in_context_message_ids == [system.id]
    assert await store.count_messages(agent.id) == 5  # all of it stays in recall
    again = await Agent.aload("flow", store=db, model=ScriptedModel([reply("again")]),
                              tools=[add])
    assert [m.id for m in again.messages] == [system.id]
    await again.run("second")
    assert (await store.get_agent(agent.id)).in_context_message_ids == [system.id]
    assert [m.text for m in (await store.list_messages(agent.id, limit=10))[-2:]] == [
        "second", "again"]


async def test_a_shared_block_is_consistent_between_agents(db):
    writer = Agent(model=ScriptedModel([call("memory_rethink", label="org",
                                             new_memory="Acme moved to Oslo"),
                                        reply("noted")]),
                   blocks=[Block("org", "Acme is in Paris")], tools=["memory_rethink"],
                   store=db, name="writer")
    reader_model = ScriptedModel([reply("Paris"), reply("Oslo")])
    reader = Agent(model=reader_model, store=db, name="reader")
    store = writer.store
    assert store is not None
    await store.attach_block(reader.id, writer.blocks[0].id)
    await reader.run("Where is Acme?")
    assert "Acme is in Paris" in reader_model.requests[0].messages[0].text
    await writer.run("Acme moved to Oslo")
    await reader.run("And now?")
    assert "Acme moved to Oslo" in reader_model.requests[1].messages[0].text


async def test_twenty_concurrent_messages_in_order_none_interleaved(db):
    model = ScriptedModel(lambda request: reply(f"re: {request.messages[-1].text}"),
                          latency=0.002)
    agent = Agent(model=model, store=db, name="busy")
    results = await asyncio.gather(*(agent.run(f"message {i}") for i in range(20)))
    assert [r.output for r in results] == [f"re: message {i}" for i in range(20)]
    store = agent.store
    assert store is not None
    stored = [m.text for m in await store.list_messages(agent.id, limit=100)][1:]
    assert stored == [t for i in range(20) for t in (f"message {i}", f"re: message {i}")]


async def test_busy_mode_rejects_a_second_run():
    agent = Agent(model=ScriptedModel([reply("slow")], latency=0.2), busy="reject")
    first = asyncio.create_task(agent.run("one"))
    await asyncio.sleep(0.05)
    with pytest.raises(AgentBusyError, match="already running"):
        await agent.run("two")
    assert (await first).output == "slow"


async def test_conversation_search_reaches_messages_out_of_context(db):
    model = ScriptedModel([reply("Noted: the vault code is 7319."), call(
        "conversation_search", query="vault code"), reply("It is 7319.")])
    agent = Agent(model=model, blocks=[Block("human", "")], store=db, name="recall")
    await agent.run("The vault code is 7319.")
    agent.reset()  # out of context, still in recall
    result = await agent.run("What was the vault code?")
    found = json.loads(result.messages[2].text)
    assert {f["content"] for f in found} == {"Noted: the vault code is 7319.",
                                             "The vault code is 7319."}
    assert all("7319" not in m.text for m in model.requests[1].messages[1:])


async def test_archival_memory_insert_and_search(db):
    model = ScriptedModel([
        call("archival_memory_insert", content="Ada's cat is named Turing", tags=["pets"],
             request_heartbeat=True),
        call("archival_memory_insert", content="The quarterly report is due in March",
             request_heartbeat=True),
        call("archival_memory_search", query="what pet does Ada have", top_k=1,
             request_heartbeat=True),
        call("send_message", message="Turing the cat.")])
    agent = Agent(model=model, agent_type="memgpt_agent", store=db, name="archivist",
                  tools=["archival_memory_insert", "archival_memory_search"])
    result = await agent.run("remember these")
    search = next(m for m in result.messages if m.name == "archival_memory_search")
    found = json.loads(search.text)
    assert [f["content"] for f in found] == ["Ada's cat is named Turing"]
    assert found[0]["tags"] == ["pets"]
    assert agent.archival_count == 2


async def test_pending_approval_survives_a_reload(db):
    agent = Agent(model=ScriptedModel([call("launch", target="moon")]), tools=[launch],
                  store=db, name="launcher")
    paused = await agent.run("go")
    call_id = paused.pending_approvals[0].id
    again = await Agent.aload("launcher", store=db, model=ScriptedModel([reply("Done.")]),
                              tools=[launch])
    assert again.pending_approval is not None
    assert again.pending_approval.requested == [call_id]
    result = await again.run(approvals=[Approval(call_id)])
    assert result.messages[0].text == "launched at moon"
    store = again.store
    assert store is not None
    assert (await store.get_agent(again.id)).pending_approval is None
    assert_transcript_valid(again.messages)


def test_crash_mid_run_is_repaired_on_load(db, tmp_path):
    marker = tmp_path / "tool-started"
    kill_when_hanging(f"""
        import time
        from pathlib import Path
        from stateloop import Agent, tool
        from stateloop.testing import ScriptedModel, call, reply

        @tool
        def add(a: int, b: int) -> int:
            '''Add.'''
            return a + b

        @tool
        def hang() -> str:
            '''Never returns.'''
            Path({str(marker)!r}).write_text("started")
            time.sleep(600)
            return "unreachable"

        agent = Agent(model=ScriptedModel([call("add", a=1, b=1), call("hang"), reply("x")]),
                      tools=[add, hang], store={db!r}, name="crashy")
        agent.run_sync("go")
    """, marker)

    @tool
    def hang() -> str:
        """Never returns."""
        return "fine now"

    model = ScriptedModel([reply("Recovered.")])
    agent = Agent.load("crashy", store=db, model=model, tools=[add, hang])
    assert_transcript_valid(agent.messages)
    # The completed first step survived; the step in flight was lost.
    assert [m.role for m in agent.messages] == ["system", "user", "assistant", "tool"]

    async def check_runs():
        store = agent.store
        assert store is not None
        return await store.list_runs(agent.id)

    runs = asyncio.run(check_runs())
    assert [(r.status, r.stop_reason) for r in runs] == [("failed", "error")]
    result = agent.run_sync("Are you ok?")
    assert result.output == "Recovered."
    assert_transcript_valid(model.requests[0].messages[1:])


async def test_a_reset_clears_a_stored_pending_approval(db):
    agent = Agent(model=ScriptedModel([call("launch", target="moon")]), tools=[launch],
                  store=db, name="resetter")
    await agent.run("go")
    agent.reset()
    await agent.save()
    again = await Agent.aload("resetter", store=db, model=ScriptedModel([]), tools=[launch])
    assert again.pending_approval is None
    assert [m.role for m in again.messages] == ["system"]


async def test_save_writes_a_reset_at_once(db):
    agent = Agent(model=ScriptedModel([reply("hi")]), store=db, name="forgetful")
    await agent.run("hello")
    agent.reset()
    await agent.save()
    again = await Agent.aload("forgetful", store=db, model=ScriptedModel([]))
    assert [m.role for m in again.messages] == ["system"]
    store = again.store
    assert store is not None
    assert await store.count_messages(again.id) == 4  # the old system prompt, the exchange,
    # and the new system prompt: history stays in recall
