"""``/v1/conversations`` through letta-client: threads of one agent that run at the same time,
share its memory (isolated blocks aside), compact, fork, cancel and wait for approval apart,
and come back after a restart."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from patience import ANSWERS
from stateloop import tool
from stateloop.llm.base import ModelRequest
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import ScriptItem, call, reply
from test_server_support import Script, Server, client, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

arrived: dict[str, threading.Event] = {}


@tool
async def slow(tag: str) -> str:
    """Wait until the other conversation's call has arrived too."""
    arrived.setdefault(tag, threading.Event()).set()
    other = arrived.setdefault("b" if tag == "a" else "a", threading.Event())
    for _ in range(500):
        if other.is_set():
            return "together"
        await asyncio.sleep(0.01)
    return "alone"


@tool
async def hang() -> str:
    """Does not return within a test."""
    await asyncio.sleep(60)
    return "late"


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch."""
    return f"launched at {target}"


def route(request: ModelRequest) -> ScriptItem:
    """Answer a user message naming a tool with a call to it, a tool result with its text."""
    last = request.messages[-1]
    if last.role == "tool":
        return reply(f"done: {last.text}")
    words = last.text.split()
    if words and words[0] in ("slow", "launch"):
        key = "tag" if words[0] == "slow" else "target"
        return call(words[0], **{key: words[1]})
    if words and words[0] == "hang":
        return call("hang")
    if words and words[0] == "remember":
        return call("memory_replace", label=words[1], old_string=words[2],
                    new_string=words[3])
    return reply(f"you said {last.text}")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("conversations") / "stateloop.db"


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, db: Path) -> Iterator[Server]:
    with Server(settings_for(fake, db), tools=(slow, hang, launch)) as running:
        yield running


@pytest.fixture
def routed(script: Script) -> Script:
    script.set(*[route] * 200)
    return script


def make_agent(client: Letta) -> Any:
    return new_agent(client, tools=["slow", "hang", "launch", "memory_replace"],
                     memory_blocks=[{"label": "human", "value": "Name: Ada"},
                                    {"label": "persona", "value": "Calm"}])


def send(client: Letta, conversation_id: str, text: str | None = None, **body: Any
         ) -> list[Any]:
    """The run's frames (letta-client streams a conversation's messages)."""
    if text is not None:
        body["input"] = text
    return list(client.conversations.messages.create(conversation_id, include_pings=False,
                                                     **body))


def output(frames: list[Any]) -> str:
    return [f for f in frames if f.message_type == "assistant_message"][-1].content


def stop(frames: list[Any]) -> str:
    return [f for f in frames if f.message_type == "stop_reason"][-1].stop_reason


def test_conversations_are_created_listed_updated_and_deleted(client: Letta,
                                                              routed: Script) -> None:
    agent = make_agent(client)
    one = client.conversations.create(agent_id=agent.id, summary="browser")
    two = client.conversations.create(agent_id=agent.id, summary="phone",
                                      extra_body={"isolated_block_labels": ["persona"]})
    assert one.agent_id == agent.id and one.summary == "browser"
    assert len(one.in_context_message_ids) == 1 and one.isolated_block_ids == []
    assert len(two.isolated_block_ids) == 1
    assert client.conversations.retrieve(one.id).summary == "browser"
    listed = client.conversations.list(agent_id=agent.id, order="asc")
    assert [c.id for c in listed] == [one.id, two.id]
    page = client.conversations.list(agent_id=agent.id, order="asc", limit=1, after=one.id)
    assert [c.id for c in page] == [two.id]
    assert client.conversations.list(agent_id=agent.id, summary_search="PHO")[0].id == two.id
    assert client.conversations.update(one.id, summary="desk").summary == "desk"
    assert output(send(client, one.id, "hello")) == "you said hello"
    after = client.conversations.retrieve(one.id)
    assert len(after.in_context_message_ids) == 3 and after.last_message_at is not None
    texts = [m.content for m in client.conversations.messages.list(one.id, order="asc")
             if m.message_type in ("user_message", "assistant_message")]
    assert texts == ["hello", "you said hello"]
    own = client.conversations.messages.list("default", agent_id=agent.id)
    assert [m.message_type for m in own] == ["system_message"]  # the agent's own thread
    client.conversations.delete(one.id)
    with pytest.raises(letta_client.NotFoundError):
        client.conversations.retrieve(one.id)
    assert [c.id for c in client.conversations.list(agent_id=agent.id)] == [two.id]
    assert [b.value for b in client.agents.blocks.list(agent.id)] == ["Name: Ada", "Calm"]
    with pytest.raises(letta_client.NotFoundError):
        client.conversations.create(agent_id="agent-00000000-0000-4000-8000-000000000000")


def test_two_conversations_of_one_agent_run_at_once(client: Letta, routed: Script) -> None:
    arrived.clear()
    agent = make_agent(client)
    one, two = (client.conversations.create(agent_id=agent.id) for _ in range(2))
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(lambda pair: send(client, *pair), [(one.id, "slow a"),
                                                           (two.id, "slow b")])
    assert output(a) == output(b) == "done: together"  # neither waited for the other
    for conversation in (one, two):
        ids = client.conversations.retrieve(conversation.id).in_context_message_ids
        assert len(ids) == 5


def test_a_block_edit_reaches_the_other_conversation_unless_isolated(
        client: Letta, routed: Script) -> None:
    agent = make_agent(client)
    one = client.conversations.create(agent_id=agent.id)
    two = client.conversations.create(agent_id=agent.id,
                                      extra_body={"isolated_block_labels": ["persona"]})
    send(client, one.id, "remember human Ada Grace")
    send(client, one.id, "remember persona Calm Bold")
    send(client, two.id, "hi")
    seen = routed.requests[-1].messages[0].text
    assert "Name: Grace" in seen and "Calm" in seen and "Bold" not in seen
    prompt = client.conversations.recompile(two.id, dry_run=True)
    assert "Name: Grace" in prompt and "Bold" not in prompt


def test_compaction_in_one_conversation_leaves_the_other_untouched(
        client: Letta, routed: Script) -> None:
    agent = make_agent(client)
    one, two = (client.conversations.create(agent_id=agent.id) for _ in range(2))
    for i in range(4):
        send(client, one.id, f"first {i} " + "words " * 40)
        send(client, two.id, f"second {i}")
    before = client.conversations.retrieve(two.id).in_context_message_ids
    result = client.conversations.messages.compact(one.id)
    assert result.num_messages_after < result.num_messages_before
    assert client.conversations.retrieve(two.id).in_context_message_ids == before
    assert len(client.conversations.retrieve(one.id).in_context_message_ids) == (
        result.num_messages_after)


def test_fork_starts_from_the_transcript_up_to_a_message(client: Letta,
                                                         routed: Script) -> None:
    agent = make_agent(client)
    source = client.conversations.create(agent_id=agent.id)
    first = send(client, source.id, "first")
    send(client, source.id, "second")
    cut = next(m for m in first if m.message_type == "assistant_message").id
    fork = client.conversations.fork(source.id, message_id=cut)
    texts = [m.content for m in client.conversations.messages.list(fork.id, order="asc")
             if m.message_type in ("user_message", "assistant_message")]
    assert texts == ["first", "you said first"]
    whole = client.conversations.fork("default", agent_id=agent.id)
    assert len(whole.in_context_message_ids) == 1  # the agent's own thread: its prompt only


def test_cancel_and_approvals_stay_inside_their_conversation(client: Letta,
                                                             routed: Script) -> None:
    agent = make_agent(client)
    one, two = (client.conversations.create(agent_id=agent.id) for _ in range(2))
    with ThreadPoolExecutor(1) as pool:
        hanging = pool.submit(send, client, one.id, "hang")
        for _ in range(500):
            if client.runs.list(agent_id=agent.id, statuses=["running"]).items:
                break
            time.sleep(0.01)
        assert output(send(client, two.id, "still here")) == "you said still here"
        cancelled = client.conversations.cancel(one.id)
        assert list(cancelled.values()) == ["cancelled"]
        assert stop(hanging.result()) == "cancelled"
    paused = send(client, two.id, "launch moon")
    assert stop(paused) == "requires_approval"
    assert output(send(client, one.id, "meanwhile")) == "you said meanwhile"
    request = next(f for f in paused if f.message_type == "approval_request_message")
    call_id = request.tool_call.tool_call_id
    done = send(client, two.id, messages=[{
        "type": "approval", "approvals": [{"type": "approval", "approve": True,
                                           "tool_call_id": call_id}]}])
    assert output(done) == "done: launched at moon"


def test_conversations_come_back_after_a_restart(fake: FakeOpenAI, routed: Script,
                                                 tmp_path: Path) -> None:
    db = tmp_path / "restart.db"
    with Server(settings_for(fake, db), tools=(slow, hang, launch)) as first:
        client = Letta(base_url=first.url, api_key="x", max_retries=0, timeout=30)
        agent = make_agent(client)
        thread = client.conversations.create(agent_id=agent.id, summary="kept")
        send(client, thread.id, "before")
        ids = client.conversations.retrieve(thread.id).in_context_message_ids
    with Server(settings_for(fake, db), tools=(slow, hang, launch)) as second:
        client = Letta(base_url=second.url, api_key="x", max_retries=0, timeout=30)
        back = client.conversations.retrieve(thread.id)
        assert back.summary == "kept" and back.in_context_message_ids == ids
        assert output(send(client, thread.id, "after")) == "you said after"
        stored = client.conversations.retrieve(thread.id).in_context_message_ids
        assert stored[:len(ids)] == ids and len(stored) == len(ids) + 2
        preview = httpx.post(f"{second.url}/v1/conversations/{thread.id}/messages/"
                             "preview-raw-payload", json={"input": "next"}).json()
        assert preview["messages"][-1]["content"] == "next"
        assert len(preview["messages"]) == len(stored) + 1


def test_a_conversations_model_settings_apply_to_its_own_requests(
        client: Letta, routed: Script, fake: FakeOpenAI) -> None:
    agent = make_agent(client)
    warm = client.conversations.create(agent_id=agent.id,
                                       model_settings={"temperature": 0.3})
    cold = client.conversations.create(agent_id=agent.id)
    bodies = []
    for conversation_id in (warm.id, cold.id):
        before = len(fake.requests)
        send(client, conversation_id, "hello")
        bodies.append(fake.requests[before].body)
    assert bodies[0]["temperature"] == 0.3 and "temperature" not in bodies[1]
    client.conversations.update(warm.id, model_settings={"temperature": 1.5})
    before = len(fake.requests)
    send(client, warm.id, "again")
    assert fake.requests[before].body["temperature"] == 1.5
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.conversations.create(agent_id=agent.id, model_settings={"temperature": 9})
    assert {c.id for c in client.conversations.list(agent_id=agent.id)} == {warm.id, cold.id}


def test_a_run_streams_only_through_its_own_conversation(client: Letta, server: Server,
                                                         routed: Script) -> None:
    ada, bob = make_agent(client), make_agent(client)
    ours = client.conversations.create(agent_id=ada.id).id
    sibling = client.conversations.create(agent_id=ada.id).id
    theirs = client.conversations.create(agent_id=bob.id).id
    frames = send(client, ours, "the secret is quokka")
    [run_id] = {getattr(frame, "run_id", None) for frame in frames} - {None}

    def stream(conversation_id: str, **body: Any) -> httpx.Response:
        return httpx.post(f"{server.url}/v1/conversations/{conversation_id}/stream",
                          json={"run_id": run_id, **body}, timeout=ANSWERS)

    own = stream(ours)
    assert own.status_code == 200 and "the secret is quokka" in own.text
    for other, body in ((theirs, {}), (sibling, {}), ("default", {"agent_id": ada.id}),
                        (ada.id, {}), (bob.id, {})):
        refused = stream(other, **body)
        assert refused.status_code == 404, (other, refused.text)
        assert refused.json()["detail"] == (f"run {run_id!r} is not a run of conversation "
                                            f"{other!r}")
        assert "quokka" not in refused.text  # (no hex id can spell it)
