"""The bound on live agents (``STATELOOP_LIVE_AGENTS``) through letta-client: fifty agents
driven in turns through a server that keeps ten live lose no message, approval or
conversation when let go, and one whose run is in flight stays live."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from letta_client import Letta

from stateloop import Agent, tool
from stateloop.llm.base import ModelRequest
from stateloop.server.services.runtime import Runtime
from stateloop.server.settings import ServerSettings
from stateloop.store import open_store
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import ScriptItem, call, reply
from test_server_support import Script, Server, client, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

BOUND = 10
gate = threading.Event()


@tool
async def hold() -> str:
    """Return once the test opens the gate."""
    for _ in range(60_000):  # ten minutes at most
        if gate.is_set():
            return "released"
        await asyncio.sleep(0.01)
    return "never released"


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch."""
    return f"launched at {target}"


def route(request: ModelRequest) -> ScriptItem:
    """A tool result is answered with its text, "launch X" and "wait" with a call (of
    ``launch``, of ``hold``), anything else with an echo."""
    last = request.messages[-1]
    if last.role == "tool":
        return reply(f"done: {last.text}")
    words = last.text.split()
    if words[:1] == ["launch"]:
        return call("launch", target=words[1])
    if words[:1] == ["wait"]:
        return call("hold")
    return reply(f"you said {last.text}")


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("live") / "stateloop.db"
    with Server(settings_for(fake, db, live_agents=BOUND), tools=(hold, launch)) as running:
        yield running


def runtime_of(server: Server) -> Runtime:
    return server.server.config.app.state.runtime  # type: ignore[no-any-return]


def texts(client: Letta, agent_id: str) -> list[str]:
    """The agent's user and assistant messages and tool returns, oldest first."""
    found = []
    for message in client.agents.messages.list(agent_id, order="asc", limit=1000):
        if message.message_type in ("user_message", "assistant_message"):
            found.append(str(message.content))
        elif message.message_type == "tool_return_message":
            found.append(f"tool: {message.tool_return}")
    return found


def said(client: Letta, agent_id: str, text: str) -> str:
    response = client.agents.messages.create(agent_id, input=text)
    return str([m for m in response.messages if m.message_type == "assistant_message"]
               [-1].content)


def test_fifty_agents_through_ten_live_lose_nothing(server: Server, script: Script) -> None:
    script.set(*[route] * 2000)
    runtime = runtime_of(server)
    client = Letta(base_url=server.url, api_key="x", max_retries=0, timeout=60)
    peak = 0

    def observe() -> None:
        nonlocal peak
        peak = max(peak, runtime.live_count)

    agents = []
    for _ in range(50):
        agents.append(new_agent(client, tools=["hold", "launch"]).id)
        observe()
    expected: dict[str, list[str]] = {agent_id: [] for agent_id in agents}
    # The first agent waits for approval of a call; the second talks in a conversation.
    paused, talker, waiting = agents[0], agents[1], agents[-1]
    response = client.agents.messages.create(paused, input="launch moon")
    assert response.stop_reason.stop_reason == "requires_approval"
    call_id = next(m for m in response.messages
                   if m.message_type == "approval_request_message").tool_call.tool_call_id
    expected[paused].append("launch moon")
    thread = client.conversations.create(agent_id=talker)
    conversation: list[str] = []

    def converse(text: str) -> None:
        frames = list(client.conversations.messages.create(thread.id, input=text,
                                                           include_pings=False))
        assert [f.content for f in frames if f.message_type == "assistant_message"] == [
            f"you said {text}"]
        conversation.extend([text, f"you said {text}"])
        expected[talker].extend([text, f"you said {text}"])  # the agent's history has both

    converse("first in thread")
    # The last agent has a run in flight until the gate opens.
    try:
        with ThreadPoolExecutor(1) as pool:
            held_run = pool.submit(said, client, waiting, "wait")
            for _ in range(6000):
                live = runtime.live(waiting)
                if live is not None and live.running:
                    break
                time.sleep(0.01)
            held_agent = runtime.live(waiting)
            assert held_agent is not None and held_agent.running
            for turn in range(3):
                converse(f"turn {turn} in thread")
                for agent_id in agents[1:-1]:
                    text = f"turn {turn} to {agent_id[-6:]}"
                    assert said(client, agent_id, text) == f"you said {text}"
                    expected[agent_id] += [text, f"you said {text}"]
                    observe()
                    assert runtime.live(waiting) is held_agent  # never let go while running
            gate.set()
            assert held_run.result(timeout=60) == "done: released"
    finally:
        gate.set()
    expected[waiting] += ["wait", "tool: released", "done: released"]
    assert peak <= BOUND
    # Let go long ago, the paused agent still waits for its approval, and takes it.
    assert runtime.live(paused) is None and runtime.live(talker) is None
    state = client.agents.retrieve(paused, include=["agent.pending_approval"])
    pending = state.pending_approval
    assert pending is not None and pending.tool_call.tool_call_id == call_id
    observe()
    approved = client.agents.messages.create(paused, messages=[{
        "type": "approval", "approvals": [{"type": "approval", "approve": True,
                                           "tool_call_id": call_id}]}])
    assert [m.content for m in approved.messages if m.message_type == "assistant_message"] \
        == ["done: launched at moon"]
    expected[paused] += ["tool: launched at moon", "done: launched at moon"]
    converse("after the others")
    observe()
    assert peak <= BOUND and runtime.live_count <= BOUND
    for agent_id in agents:
        assert texts(client, agent_id) == expected[agent_id], agent_id
    in_thread = [str(m.content) for m in client.conversations.messages.list(thread.id,
                                                                              order="asc")
                 if m.message_type in ("user_message", "assistant_message")]
    assert in_thread == conversation


def test_racing_loads_share_one_agent_and_a_held_one_stays(tmp_path: Path) -> None:
    """Requests racing to load one agent get the same object; an agent a task still holds
    is not let go, however long ago it was used; once the task ends it may be."""

    async def scenario() -> None:
        settings = ServerSettings(database_url=f"sqlite:///{tmp_path / 'race.db'}",
                                  live_agents=2, model_api_key="unused")
        store = await open_store(settings.database_url)
        runtime = Runtime(settings, store)
        try:
            ids = [(await Agent.acreate("openai/gpt-4o-mini", store=store,
                                        name=f"a{n}")).id for n in range(5)]
            racing = await asyncio.gather(*(runtime.agent(ids[0]) for _ in range(8)))
            assert all(agent is racing[0] for agent in racing)
            first = racing[0]
            release = asyncio.Event()

            async def request(agent_id: str, loaded: asyncio.Event) -> None:
                await runtime.agent(agent_id)
                loaded.set()
                await release.wait()  # holds its agent until then

            holders = []
            for agent_id in ids[1:3]:  # ids[1] is the least recently used of them
                loaded = asyncio.Event()
                holders.append(asyncio.create_task(request(agent_id, loaded)))
                await loaded.wait()
            for agent_id in ids[3:]:  # each in a task of its own, done once loaded
                await asyncio.create_task(runtime.agent(agent_id))
            # The held ones stay (over the bound while held), the least recently used
            # idle one went first.
            assert runtime.live(ids[1]) is not None and runtime.live(ids[2]) is not None
            assert runtime.live(ids[0]) is None and runtime.live_count <= 3
            release.set()
            await asyncio.gather(*holders)
            again = await runtime.agent(ids[0])  # read from the store anew
            assert again is not first and again.id == ids[0]
            await asyncio.sleep(0)  # the main task holds it; the oldest idle ones went
            assert runtime.live_count == 2 and runtime.live(ids[1]) is None
        finally:
            await store.close()

    asyncio.run(scenario())
