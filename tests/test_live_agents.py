"""One owner of the live agents of a store (``stateloop.live_agents.LiveAgents``): the library's
per store, and the server's ``Runtime``, which delegates making, loading, caching and finding
its agents to one, so a tool, a memory agent's main agent and a route all get the same live
object."""

from __future__ import annotations

import asyncio
from pathlib import Path

from stateloop import Agent
from stateloop.live_agents import LiveAgents, library_agents, live_agents_of
from stateloop.server.services.runtime import Runtime
from stateloop.server.settings import ServerSettings
from stateloop.store import open_store
from stateloop.testing import ScriptedModel, reply


def test_agents_without_a_store_are_made_and_found_by_their_owner() -> None:
    async def scenario() -> None:
        first = Agent(ScriptedModel([]), name="first", tags=["team", "red"])
        owner = live_agents_of(first)
        made = await owner.create(ScriptedModel([reply("hello")]), name="made", tags=["team"])
        assert isinstance(made, Agent) and made.store is None
        assert live_agents_of(made) is owner  # one owner for the agents without a store
        assert await owner.agent(made.id) is made
        assert owner.live(first.id) is first
        assert set(await owner.tagged(["team"], [])) >= {first.id, made.id}
        assert first.id not in await owner.tagged(["team"], ["blue"])
        result = await made.run("hi")
        assert result.output == "hello"

    asyncio.run(scenario())


def test_the_server_runtime_hands_out_its_owners_agents(tmp_path: Path) -> None:
    async def scenario() -> None:
        settings = ServerSettings(database_url=f"sqlite:///{tmp_path / 'owner.db'}",
                                  live_agents=5, model_api_key="unused")
        store = await open_store(settings.database_url)
        runtime = Runtime(settings, store)
        try:
            assert isinstance(runtime.agents, LiveAgents) and runtime.agents.store is store
            main = await Agent.acreate("openai/gpt-4o-mini", store=store, name="main",
                                       enable_sleeptime=True, sleeptime_agent_frequency=1)
            main_id = main.id
            memory_id = main.sleeptime.link.memory_agent_id if main.sleeptime else None
            assert memory_id is not None
            del main  # the server loads its own

            live = await runtime.agent(main_id)
            assert live is runtime.live(main_id) is await runtime.agents.agent(main_id)
            # Its tools find other agents through the same owner.
            assert live_agents_of(live) is runtime.agents
            # Its memory agent is the owner's live one, not a copy of its own.
            assert live.sleeptime is not None
            memory = await live.sleeptime.memory_agent()
            assert memory is runtime.live(memory_id)
            assert live_agents_of(memory) is runtime.agents
            assert runtime.live_count == 2
            runtime.forget(memory_id)
            assert runtime.live(memory_id) is None and runtime.live_count == 1
            again = await live.sleeptime.memory_agent()  # loaded anew, through the owner
            assert again is not memory and again is runtime.live(memory_id)
        finally:
            await store.close()

    asyncio.run(scenario())


def test_the_library_owner_of_a_store_serves_its_agents_and_the_cli(tmp_path: Path) -> None:
    """The CLI makes and loads its agents through the library's owner of the store, the one
    the agents' own tools ask: a session's agent is the live one of its id."""
    async def scenario() -> None:
        store = await open_store(f"sqlite:///{tmp_path / 'library.db'}")
        try:
            owner = library_agents(store, Agent)
            made = await owner.create("openai/gpt-4o-mini", name="made")
            assert made.store is store and live_agents_of(made) is owner
            session = await owner.load(made.id, model=ScriptedModel([reply("hi there")]))
            assert session is not made and await owner.agent(made.id) is session
            assert (await session.run("hello")).output == "hi there"
            assert (await store.get_agent(made.id)).name == "made"
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_maker_that_writes_the_store_itself_creates_through_the_owner(
        tmp_path: Path) -> None:
    """``create(write=...)``: the owner makes the agent (its settings checked) and hands it
    to ``write``, which stores it; a bad setting reaches no ``write``; the stored agent is
    loaded by the owner when first asked for, once."""
    async def scenario() -> None:
        store = await open_store(f"sqlite:///{tmp_path / 'write.db'}")
        owner = LiveAgents(store, Agent)
        written: list[Agent] = []

        async def write(draft: Agent) -> None:
            written.append(draft)
            await store.create_agent(draft.to_record(), [])
            await store.append_step(draft.id, [draft.messages[0]])

        draft = await owner.create("openai/gpt-4o-mini", write=write, name="drafted",
                                   system="Be brief.", api_key="unused")
        assert written == [draft] and draft.store is None and owner.live(draft.id) is None
        live = await owner.agent(draft.id)
        assert live is not draft and live.store is store and live.name == "drafted"
        assert live.system == "Be brief." and await owner.agent(draft.id) is live

        try:
            await owner.create("openai/gpt-4o-mini", write=write, max_steps=0)
        except ValueError as exc:
            assert "max_steps" in str(exc)
        else:
            raise AssertionError("max_steps=0 was accepted")
        assert written == [draft]  # nothing reached the store
        await store.close()

    asyncio.run(scenario())
