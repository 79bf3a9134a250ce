"""``enable_sleeptime`` over letta-client: the agent shows its sleeptime group, which is a
group of ``/v1/groups`` (listed, its frequency changed by PATCH, deleted to turn sleeptime
off, kept across a restart); the memory agent is a real agent, it edits the shared block in
the background, and turning it off stops it."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from letta_spec import assert_letta_shape
from stateloop.llm.base import ModelRequest
from stateloop.memory.sleeptime_prompt import SYSTEM_PROMPT
from stateloop.store import open_store
from stateloop.testing import call, reply
from stateloop.testing.scripted import ScriptItem
from test_server_support import Server, client, fake, new_agent, script, server, settings_for  # noqa: F401 (fixtures)


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
    memory = client.agents.retrieve(group.agent_ids[0], include=["agent.blocks", "agent.tools"])
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
    state = client.agents.retrieve(agent.id, include=["agent.managed_group"])
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
    after = client.agents.retrieve(main.id, include=["agent.managed_group"])
    assert after.multi_agent_group is None and not after.enable_sleeptime
    send(client, main.id, "still fine")

    other = new_agent(client, enable_sleeptime=True)
    assert other.multi_agent_group is not None
    partner = other.multi_agent_group.agent_ids[0]
    client.agents.delete(other.id)  # its memory agent goes with it, as in Letta
    with pytest.raises(letta_client.NotFoundError):
        client.agents.retrieve(partner)


def get(client: Letta, path: str) -> Any:
    return client.get(path, cast_to=object)


def patch_group(client: Letta, group_id: str, body: dict[str, Any]) -> Any:
    return client.patch(f"/v1/groups/{group_id}", body=body, cast_to=object)


def frequency(n: int) -> dict[str, Any]:
    """Letta's documented way to change how often the memory agent runs."""
    return {"manager_config": {"manager_type": "sleeptime", "sleeptime_agent_frequency": n}}


def test_the_sleeptime_group_is_a_group(client: Letta, script: Script) -> None:
    script.set(*[answers()] * 10)
    agent = new_agent(client, enable_sleeptime=True)
    assert agent.multi_agent_group is not None
    group_id, memory_id = agent.multi_agent_group.id, agent.multi_agent_group.agent_ids[0]
    group = get(client, f"/v1/groups/{group_id}")
    assert_letta_shape("/v1/groups/{group_id}", "get", group)
    assert group == agent.multi_agent_group.model_dump(mode="json")
    assert (group["manager_type"], group["manager_agent_id"], group["agent_ids"],
            group["sleeptime_agent_frequency"], group["turns_counter"]) == (
        "sleeptime", agent.id, [memory_id], 5, 0)
    assert group_id in [g["id"] for g in get(client, "/v1/groups")]
    sleeptime_groups = client.get("/v1/groups", cast_to=object,
                                  options={"params": {"manager_type": "sleeptime"}})
    assert group_id in [g["id"] for g in sleeptime_groups]  # type: ignore[union-attr]
    # Listed for both agents of the pair: the main agent manages it, the memory agent is
    # its member (Letta lists an agent's groups by membership only).
    for agent_id in (agent.id, memory_id):
        assert [g["id"] for g in get(client, f"/v1/agents/{agent_id}/groups")] == [group_id]


def test_patching_the_frequency_is_honoured_by_the_next_turns(client: Letta,
                                                              script: Script) -> None:
    script.set(*[answers()] * 20)
    agent = new_agent(client, enable_sleeptime=True)  # every 5 turns
    assert agent.multi_agent_group is not None
    group_id, memory_id = agent.multi_agent_group.id, agent.multi_agent_group.agent_ids[0]
    changed = patch_group(client, group_id, frequency(2))
    assert_letta_shape("/v1/groups/{group_id}", "patch", changed)
    assert (changed["sleeptime_agent_frequency"], changed["turns_counter"]) == (2, 0)
    send(client, agent.id, "one")
    time.sleep(0.3)
    assert _statuses(client, memory_id) == []
    send(client, agent.id, "two")  # the second turn of two
    wait_for(lambda: _statuses(client, memory_id) == ["completed"])
    kept = patch_group(client, group_id, {"manager_config": {"manager_type": "sleeptime"}})
    assert kept["sleeptime_agent_frequency"] == 2  # as in Letta: unset keeps it
    send(client, agent.id, "three")
    send(client, agent.id, "four")
    wait_for(lambda: _statuses(client, memory_id) == ["completed"] * 2)
    state = client.agents.retrieve(agent.id, include=["agent.managed_group"])
    assert state.multi_agent_group is not None
    assert state.multi_agent_group.sleeptime_agent_frequency == 2

    with pytest.raises(letta_client.UnprocessableEntityError, match="manager type"):
        patch_group(client, group_id, {"manager_config": {"manager_type": "round_robin"}})


def test_deleting_the_sleeptime_group_turns_sleeptime_off(client: Letta,
                                                          script: Script) -> None:
    script.set(*[answers()] * 20)
    agent = new_agent(client, enable_sleeptime=True)
    assert agent.multi_agent_group is not None
    group_id, memory_id = agent.multi_agent_group.id, agent.multi_agent_group.agent_ids[0]
    patch_group(client, group_id, frequency(1))
    client.delete(f"/v1/groups/{group_id}", cast_to=object)
    after = client.agents.retrieve(agent.id, include=["agent.managed_group"])
    assert after.multi_agent_group is None and not after.enable_sleeptime
    assert client.agents.retrieve(memory_id).agent_type == "sleeptime_agent"  # it stays
    for n in range(3):
        send(client, agent.id, f"alone {n}")
    time.sleep(0.3)
    assert _statuses(client, memory_id) == []
    again = client.agents.update(agent.id, enable_sleeptime=True)  # as Letta: a new pair
    assert again.multi_agent_group is not None and again.multi_agent_group.id != group_id
    assert again.multi_agent_group.agent_ids != [memory_id]


def test_a_message_to_the_sleeptime_group_goes_to_its_main_agent(server: Server,
                                                                  client: Letta,
                                                                  script: Script) -> None:
    script.set(*[answers()] * 10)
    agent = new_agent(client, enable_sleeptime=True)
    assert agent.multi_agent_group is not None
    group_id, memory_id = agent.multi_agent_group.id, agent.multi_agent_group.agent_ids[0]
    patch_group(client, group_id, frequency(1))
    response = httpx.post(f"{server.url}/v1/groups/{group_id}/messages",
                          json={"messages": [{"role": "user", "content": "via the group"}]},
                          timeout=30)
    assert response.status_code == 200
    assert [m["content"] for m in response.json()["messages"]
            if m["message_type"] == "assistant_message"] == ["ok"]
    texts = [m.content for m in client.agents.messages.list(agent.id).items
             if m.message_type == "user_message"]
    assert "via the group" in texts
    wait_for(lambda: _statuses(client, memory_id) == ["completed"])  # it counted as a turn


def test_the_sleeptime_group_survives_a_restart(fake, script: Script, tmp_path) -> None:
    script.set(*[answers()] * 10)
    db = tmp_path / "restart.db"
    with Server(settings_for(fake, db)) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
        agent = new_agent(client, enable_sleeptime=True)
        assert agent.multi_agent_group is not None
        group_id, memory_id = agent.multi_agent_group.id, agent.multi_agent_group.agent_ids[0]
        patch_group(client, group_id, frequency(2))
        send(client, agent.id, "before")
    with Server(settings_for(fake, db)) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
        group = get(client, f"/v1/groups/{group_id}")
        assert (group["agent_ids"], group["sleeptime_agent_frequency"],
                group["turns_counter"]) == ([memory_id], 2, 1)
        state = client.agents.retrieve(agent.id, include=["agent.managed_group"])
        assert state.multi_agent_group is not None and state.multi_agent_group.id == group_id
        send(client, agent.id, "after")  # the second turn of two, across the restart
        wait_for(lambda: _statuses(client, memory_id) == ["completed"])
        given = [r for r in script.requests if SYSTEM_PROMPT[:40] in r.messages[0].text]
        assert "user: before" in given[-1].messages[-1].text


def test_a_sleeptime_group_given_another_manager_leaves_its_former_main_agent(
        client: Letta, script: Script) -> None:
    script.set(*[answers()] * 20)
    agent, other = new_agent(client, enable_sleeptime=True), new_agent(client)
    assert agent.multi_agent_group is not None
    group_id, memory_id = agent.multi_agent_group.id, agent.multi_agent_group.agent_ids[0]
    patch_group(client, group_id, frequency(1))
    send(client, agent.id, "warm up")  # its sleeptime is live, and runs after every turn
    wait_for(lambda: _statuses(client, memory_id) == ["completed"])
    moved = patch_group(client, group_id, {"manager_config": {
        "manager_type": "sleeptime", "manager_agent_id": other.id,
        "sleeptime_agent_frequency": 1}})
    assert moved["manager_agent_id"] == other.id
    managed = ["agent.managed_group"]
    assert client.agents.retrieve(agent.id, include=managed).multi_agent_group is None
    assert client.agents.retrieve(other.id, include=managed).multi_agent_group.id == group_id  # type: ignore[union-attr]
    for n in range(2):
        send(client, agent.id, f"former {n}")
    time.sleep(0.3)
    assert _statuses(client, memory_id) == ["completed"]
