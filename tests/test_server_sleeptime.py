"""``enable_sleeptime`` over letta-client: the agent shows its sleeptime group, the memory
agent is a real agent, it edits the shared block in the background, and turning it off
stops it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.llm.base import ModelRequest
from stateloop.memory.sleeptime_prompt import SYSTEM_PROMPT
from stateloop.store import open_store
from stateloop.testing import call, reply
from stateloop.testing.scripted import ScriptItem
from test_server_support import Server, new_agent, settings_for

pytest_plugins = ["test_server_support"]  # its fixtures: fake, server, client, script


def answers(*memory_items: ScriptItem | Callable[[ModelRequest], ScriptItem]
            ) -> Callable[[ModelRequest], ScriptItem]:
    """The main agent says "ok"; the memory agent (told by its system prompt) plays
    ``memory_items``, then finishes its edits."""
    queue = list(memory_items)

    def answer(request: ModelRequest) -> ScriptItem:
        if SYSTEM_PROMPT[:40] in request.messages[0].text:
            item = queue.pop(0) if queue else call("memory_finish_edits")
            return item(request) if callable(item) else item
        return reply("ok")

    return answer


def send(client: Letta, agent_id: str, text: str) -> None:
    client.agents.messages.create(agent_id, messages=[{"role": "user", "content": text}])


def wait_for(check: Callable[[], bool]) -> None:
    for _ in range(400):
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("the background memory run never got there")


def test_enable_sleeptime_makes_a_memory_agent_that_edits_the_shared_block(
        client: Letta, script: Script) -> None:
    answer = answers(call("memory_insert", label="human", new_string="Likes tea"))
    script.set(*[answer] * 30)
    agent = new_agent(client, name="tea-drinker", enable_sleeptime=True)
    assert agent.enable_sleeptime
    group = agent.multi_agent_group
    assert group is not None and agent.managed_group is not None
    assert agent.managed_group.model_dump() == group.model_dump()
    assert group.manager_type == "sleeptime" and group.manager_agent_id == agent.id
    assert group.sleeptime_agent_frequency == 5 and len(group.agent_ids) == 1
    memory = client.agents.retrieve(group.agent_ids[0])
    assert memory.agent_type == "sleeptime_agent" and memory.name == "tea-drinker-sleeptime"
    assert [b.label for b in memory.blocks] == ["memory_persona", "human"]
    human = next(b for b in agent.blocks if b.label == "human")
    assert memory.blocks[1].id == human.id  # shared, not copied
    assert {t.name for t in memory.tools} >= {"memory_insert", "memory_finish_edits"}
    assert memory.id in {a.id for a in client.agents.list(name=memory.name)}  # listed

    for n in range(5):
        send(client, agent.id, f"turn {n}: I like tea")
    wait_for(lambda: "Likes tea" in (client.blocks.retrieve(human.id).value or ""))
    send(client, agent.id, "what do I like?")
    mains = [r for r in script.requests if SYSTEM_PROMPT[:40] not in r.messages[0].text]
    assert "Likes tea" in mains[-1].messages[0].text  # the main agent's next request
    state = client.agents.retrieve(agent.id)
    assert state.multi_agent_group is not None
    assert state.multi_agent_group.turns_counter in (0, 1)
    assert state.multi_agent_group.last_processed_message_id is not None


def test_turning_sleeptime_off_stops_the_memory_agent(client: Letta, script: Script) -> None:
    script.set(*[answers()] * 40)
    agent = new_agent(client)
    assert agent.multi_agent_group is None and not agent.enable_sleeptime
    on = client.agents.update(agent.id, enable_sleeptime=True)
    assert on.enable_sleeptime and on.multi_agent_group is not None
    memory_id = on.multi_agent_group.agent_ids[0]
    for n in range(5):
        send(client, agent.id, f"turn {n}")
    wait_for(lambda: _statuses(client, memory_id) == ["completed"])

    off = client.agents.update(agent.id, enable_sleeptime=False)
    assert not off.enable_sleeptime
    assert off.multi_agent_group is not None  # the group stays, idle (as in Letta)
    for n in range(5):
        send(client, agent.id, f"quiet {n}")
    again = client.agents.update(agent.id, enable_sleeptime=True)
    assert again.multi_agent_group is not None
    assert again.multi_agent_group.agent_ids == [memory_id]  # the same memory agent
    assert _statuses(client, memory_id) == ["completed"]


def _statuses(client: Letta, agent_id: str) -> list[str]:
    return [str(run.status) for run in client.runs.list(agent_id=agent_id)]


def test_shutdown_cancels_a_memory_run_in_flight(fake, script: Script, tmp_path) -> None:
    started, release = threading.Event(), threading.Event()

    def hang(request: ModelRequest) -> ScriptItem:
        started.set()
        release.wait(20)
        return call("memory_finish_edits")

    script.set(*[answers(hang)] * 10)
    db = tmp_path / "shutdown.db"
    try:
        with Server(settings_for(fake, db)) as server:
            client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
            agent = new_agent(client, enable_sleeptime=True)
            assert agent.multi_agent_group is not None
            memory_id = agent.multi_agent_group.agent_ids[0]
            for n in range(5):
                send(client, agent.id, f"turn {n}")
            assert started.wait(20)
        # The server has stopped: the memory run did not outlive it, and says so.
    finally:
        release.set()

    async def stored() -> list[tuple[str, str | None]]:
        async with await open_store(f"sqlite:///{db}") as store:
            return [(r.status, r.stop_reason) for r in await store.list_runs(memory_id)]

    assert asyncio.run(stored()) == [("cancelled", "cancelled")]


def test_deleting_either_agent_of_the_pair(client: Letta, script: Script) -> None:
    script.set(*[answers()] * 10)
    main = new_agent(client, enable_sleeptime=True)
    assert main.multi_agent_group is not None
    memory_id = main.multi_agent_group.agent_ids[0]
    client.agents.delete(memory_id)  # the main agent loses its group
    after = client.agents.retrieve(main.id)
    assert after.multi_agent_group is None and not after.enable_sleeptime
    send(client, main.id, "still fine")

    other = new_agent(client, enable_sleeptime=True)
    assert other.multi_agent_group is not None
    partner = other.multi_agent_group.agent_ids[0]
    client.agents.delete(other.id)  # its memory agent goes with it, as in Letta
    with pytest.raises(letta_client.NotFoundError):
        client.agents.retrieve(partner)
