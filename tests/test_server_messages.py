"""Messages over HTTP with letta-client: plain, SSE, tokens, approvals, history, runs."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import held, slow
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from test_server_support import (  # noqa: F401 (fixtures)
    Script,
    Server,
    client,
    fake,
    new_agent,
    script,
    server,
    settings_for,
)

SHOUT = '''
def shout(text: str) -> str:
    """Repeat the text in capitals.

    Args:
        text: What to repeat.
    """
    return text.upper()
'''


@pytest.fixture(scope="module")
def shout_tool(server: Server) -> Any:
    return Letta(base_url=server.url, api_key="x").tools.create(source_code=SHOUT)


def kinds(messages: list[Any]) -> list[str]:
    return [m.message_type for m in messages]


def test_plain_message_with_a_source_tool(client: Letta, script: Script,
                                          shout_tool: Any) -> None:
    agent = new_agent(client, tools=["shout"])
    script.set(call("shout", text="hello"), reply("It said HELLO."))
    response = client.agents.messages.create(
        agent.id, messages=[{"role": "user", "content": "Shout hello"}])
    assert kinds(response.messages) == ["tool_call_message", "tool_return_message",
                                        "assistant_message"]
    call_message, result, answer = response.messages
    assert call_message.tool_call.name == "shout"  # type: ignore[union-attr]
    assert result.tool_return == "HELLO" and result.status == "success"  # type: ignore[union-attr]
    assert result.tool_call_id == call_message.tool_call.tool_call_id  # type: ignore[union-attr]
    assert answer.content == "It said HELLO."  # type: ignore[union-attr]
    assert response.stop_reason.stop_reason == "end_turn"
    assert response.usage.step_count == 2 and response.usage.total_tokens
    assert script.requests[0].messages[-1].text == "Shout hello"


def test_streamed_steps_end_with_stop_reason_and_usage(client: Letta, script: Script,
                                                       shout_tool: Any) -> None:
    agent = new_agent(client, tools=["shout"])
    script.set(call("shout", text="x"), reply("Done."))
    frames = list(client.agents.messages.create(agent.id, input="go", streaming=True,
                                                include_pings=False))
    assert kinds(frames) == ["tool_call_message", "tool_return_message", "assistant_message",
                             "stop_reason", "usage_statistics"]
    assert [f.seq_id for f in frames] == [1, 2, 3, 4, 5]
    assert frames[3].stop_reason == "end_turn"  # type: ignore[union-attr]
    assert frames[4].step_count == 2  # type: ignore[union-attr]


def test_token_streaming_and_message_type_filter(client: Letta, script: Script,
                                                 server: Server) -> None:
    agent = new_agent(client)
    script.set(reply("The quick brown fox jumps.", reasoning="Let me think."))
    with pytest.warns(DeprecationWarning):
        stream = client.agents.messages.stream(agent.id, input="go", stream_tokens=True)
    frames = list(stream)
    texts = [f.content for f in frames if f.message_type == "assistant_message"]
    assert len(texts) > 3 and "".join(texts) == "The quick brown fox jumps."  # type: ignore
    thoughts = [f.reasoning for f in frames if f.message_type == "reasoning_message"]
    assert "".join(thoughts) == "Let me think."  # type: ignore[arg-type]
    assert len({f.id for f in frames if f.message_type == "assistant_message"}) == 1
    script.set(reply("Only this.", reasoning="hidden"))
    filtered = list(client.agents.messages.create(
        agent.id, input="again", streaming=True,
        include_return_message_types=["assistant_message"]))
    assert kinds(filtered) == ["assistant_message", "stop_reason", "usage_statistics"]


def test_keepalive_pings_while_the_model_is_slow(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(slow(0.7, reply("late")))
    frames = list(client.agents.messages.create(agent.id, input="go", streaming=True,
                                                include_pings=True))
    assert "ping" in kinds(frames)
    assert kinds(frames)[-3:] == ["assistant_message", "stop_reason", "usage_statistics"]


def test_approve_and_deny_tool_calls(client: Letta, script: Script, shout_tool: Any) -> None:
    agent = new_agent(client, tools=["shout"])
    client.agents.tools.update_approval("shout", agent_id=agent.id, body_requires_approval=True)
    script.set(call("shout", text="yes"))
    paused = client.agents.messages.create(agent.id, input="shout yes")
    assert paused.stop_reason.stop_reason == "requires_approval"
    request = paused.messages[-1]
    assert request.message_type == "approval_request_message"
    call_id = request.tool_call.tool_call_id  # type: ignore[union-attr]
    state = client.agents.retrieve(agent.id, include=["agent.pending_approval"])
    assert state.pending_approval is not None
    assert state.pending_approval.tool_call.tool_call_id == call_id  # type: ignore[union-attr]
    assert kinds(list(client.agents.messages.list(agent.id, order="asc")))[-1] == (
        "approval_request_message")
    with pytest.raises(letta_client.ConflictError, match="approval"):
        client.agents.messages.create(agent.id, input="something else")
    with pytest.raises(letta_client.BadRequestError, match="Invalid tool call IDs"):
        client.agents.messages.create(agent.id, messages=[{
            "type": "approval", "approvals": [{"type": "approval", "tool_call_id": "nope",
                                               "approve": True}]}])
    script.set(reply("Shouted."))
    approved = client.agents.messages.create(agent.id, messages=[{
        "type": "approval", "approvals": [{"type": "approval", "tool_call_id": call_id,
                                           "approve": True}]}])
    assert kinds(approved.messages) == ["tool_return_message", "assistant_message"]
    assert approved.messages[0].tool_return == "YES"  # type: ignore[union-attr]
    assert "approval_request_message" not in kinds(list(client.agents.messages.list(agent.id)))

    script.set(call("shout", text="no"))
    paused = client.agents.messages.create(agent.id, input="shout no")
    call_id = paused.messages[-1].tool_call.tool_call_id  # type: ignore[union-attr]
    script.set(reply("Fine, I won't."))
    denied = client.agents.messages.create(agent.id, messages=[{
        "type": "approval", "approvals": [{"type": "approval", "tool_call_id": call_id,
                                           "approve": False, "reason": "too loud"}]}])
    denial = denied.messages[0]
    assert denial.status == "error" and "too loud" in denial.tool_return  # type: ignore
    assert script.requests[-1].messages[-1].text.endswith("too loud")


def test_client_side_tool_return(client: Letta, script: Script, shout_tool: Any) -> None:
    agent = new_agent(client, tools=["shout"])
    client.agents.tools.update_approval("shout", agent_id=agent.id, body_requires_approval=True)
    script.set(call("shout", text="ok"))
    paused = client.agents.messages.create(agent.id, input="go")
    call_id = paused.messages[-1].tool_call.tool_call_id  # type: ignore[union-attr]
    script.set(reply("Thanks."))
    done = client.agents.messages.create(agent.id, messages=[{
        "type": "approval", "approvals": [{"type": "tool", "tool_call_id": call_id,
                                           "status": "success", "tool_return": "ran locally"}]}])
    assert done.messages[0].tool_return == "ran locally"  # type: ignore[union-attr]


def test_page_through_messages(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    for i in range(4):
        script.set(reply(f"answer {i}"))
        client.agents.messages.create(agent.id, input=f"question {i}")
    everything = list(client.agents.messages.list(agent.id, limit=1000, order="asc"))
    assert kinds(everything)[0] == "system_message" and len(everything) == 9
    walked = list(client.agents.messages.list(agent.id, limit=2, order="asc"))
    assert [m.id for m in walked] == [m.id for m in everything]
    page = client.agents.messages.list(agent.id, limit=2, order="asc",
                                       after=everything[2].id).items
    assert [m.id for m in page] == [m.id for m in everything[3:5]]
    users = list(client.agents.messages.list(agent.id, include_return_message_types=[
        "user_message"], limit=100))
    assert [m.content for m in users] == [f"question {i}" for i in range(4)]  # type: ignore


def test_newest_page_reads_oldest_first_and_cursors_point_in_time(client: Letta,
                                                                  script: Script) -> None:
    agent = new_agent(client)
    for i in range(3):
        script.set(reply(f"answer {i}"))
        client.agents.messages.create(agent.id, input=f"question {i}")
    everything = client.agents.messages.list(agent.id, limit=100, order="asc").items
    # desc picks the newest messages; the page itself reads in the order they were sent.
    newest = client.agents.messages.list(agent.id, limit=3).items
    assert [m.id for m in newest] == [m.id for m in everything[-3:]]
    older = client.agents.messages.list(agent.id, limit=2, before=everything[4].id).items
    assert [m.id for m in older] == [m.id for m in everything[2:4]]
    assert client.agents.messages.list(agent.id, after=everything[-1].id).items == []
    # The usual "what came since": remember the newest id, send, list after it.
    [last] = client.agents.messages.list(agent.id, limit=1).items
    assert last.id == everything[-1].id
    script.set(reply("answer 3"))
    client.agents.messages.create(agent.id, input="question 3")
    since = client.agents.messages.list(agent.id, after=last.id).items
    assert [getattr(m, "content", None) for m in since] == ["question 3", "answer 3"]
    assert kinds(since) == ["user_message", "assistant_message"]


def test_async_run_then_cancel(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    never = threading.Event()  # the model answers only after the run is cancelled
    script.set(held(never, reply("too late")))
    try:
        run = client.agents.messages.create_async(agent.id, input="take your time")
        assert run.status == "running" and run.agent_id == agent.id
        cancelled = client.agents.messages.cancel(agent.id, run_ids=[run.id])
        assert run.id in cancelled
        while client.runs.retrieve(run.id).status == "running":
            time.sleep(0.05)
    finally:
        never.set()
    final = client.runs.retrieve(run.id)
    assert (final.status, final.stop_reason) == ("cancelled", "cancelled")
    assert run.id in [r.id for r in client.runs.list(agent_id=agent.id)]


def test_run_steps_usage_messages_and_stream_resume(client: Letta, script: Script,
                                                    shout_tool: Any) -> None:
    agent = new_agent(client, tools=["shout"])
    script.set(call("shout", text="a"), reply("Done."))
    run = client.agents.messages.create_async(agent.id, input="go")
    while client.runs.retrieve(run.id).status == "running":
        time.sleep(0.05)
    steps = list(client.runs.steps.list(run.id))
    assert len(steps) == 2 and all(s.prompt_tokens and s.completion_tokens for s in steps)
    usage = client.runs.usage.retrieve(run.id)
    assert usage.prompt_tokens == sum(s.prompt_tokens or 0 for s in steps)
    assert usage.completion_tokens == sum(s.completion_tokens or 0 for s in steps)
    messages = list(client.runs.messages.list(run.id))
    assert kinds(messages) == ["user_message", "tool_call_message", "tool_return_message",
                               "assistant_message"]
    resumed = list(client.runs.messages.stream(run.id, starting_after=2))
    assert [getattr(f, "seq_id", None) for f in resumed][:1] == [3]
    assert kinds(resumed) == ["assistant_message", "stop_reason", "usage_statistics"]


def test_archival_memory_insert_list_search_delete(client: Letta) -> None:
    agent = new_agent(client)
    first = client.agents.passages.create(agent.id, text="The cat sat on the mat.",
                                          tags=["pets"])[0]
    client.agents.passages.create(agent.id, text="Quarterly revenue grew 12%.")
    listed = client.agents.passages.list(agent.id)
    assert [p.text for p in listed] == ["The cat sat on the mat.", "Quarterly revenue grew 12%."]
    found = client.agents.passages.search(agent.id, query="The cat sat on the mat.", top_k=1)
    assert found.count == 1 and found.results[0].id == first.id
    tagged = client.agents.passages.search(agent.id, query="anything", tags=["pets"])
    assert [r.id for r in tagged.results] == [first.id]
    client.agents.passages.delete(first.id, agent_id=agent.id)
    assert [p.text for p in client.agents.passages.list(agent.id)] == [
        "Quarterly revenue grew 12%."]


def test_context_overview(client: Letta, server: Server, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("hi"))
    client.agents.messages.create(agent.id, input="hello")
    overview = httpx.get(f"{server.url}/v1/agents/{agent.id}/context").json()
    assert overview["context_window_size_max"] == 128_000
    assert overview["num_messages"] >= 2 and overview["num_tokens_core_memory"] > 0
    assert "Name: Ada" in overview["core_memory"]


def test_steer_a_run_in_flight(client: Letta, script: Script, server: Server,
                               shout_tool: Any) -> None:
    agent = new_agent(client, tools=["shout"])
    first_step = threading.Event()  # the first step waits until the steer is in
    script.set(held(first_step, call("shout", text="a")), reply("Steered."))
    try:
        run = client.agents.messages.create_async(agent.id, input="start")
        steered = httpx.post(f"{server.url}/v1/agents/{agent.id}/messages/steer",
                             json={"content": "Actually, stop after this."})
    finally:
        first_step.set()
    assert steered.status_code == 202
    assert steered.json() == {"status": "delivered", "run_id": run.id}
    while client.runs.retrieve(run.id).status == "running":
        time.sleep(0.05)
    assert script.requests[-1].messages[-1].text == "Actually, stop after this."


def test_busy_mode_rejects_a_second_run_with_409(fake: FakeOpenAI, script: Script,
                                                 tmp_path: Any) -> None:
    with Server(settings_for(fake, tmp_path / "busy.db", busy="reject")) as busy:
        client = Letta(base_url=busy.url, api_key="x", max_retries=0)
        agent = new_agent(client)
        first = threading.Event()
        script.set(held(first, reply("first")))
        try:
            run = client.agents.messages.create_async(agent.id, input="one")
            with pytest.raises(letta_client.ConflictError, match="already running"):
                client.agents.messages.create(agent.id, input="two")
        finally:
            first.set()
        while client.runs.retrieve(run.id).status == "running":
            time.sleep(0.05)


def test_max_steps_and_override_model_apply_to_one_request(
        client: Letta, script: Script, fake: FakeOpenAI, shout_tool: Any) -> None:
    agent = new_agent(client, tools=["shout"])
    script.set(call("shout", text="a"), call("shout", text="b"))
    response = client.agents.messages.create(agent.id, input="go", max_steps=1)
    assert response.stop_reason.stop_reason == "max_steps"
    assert kinds(response.messages) == ["tool_call_message", "tool_return_message"]

    script.set(reply("From the other model."))
    seen = len(fake.requests)
    response = client.agents.messages.create(agent.id, input="again",
                                             override_model="openai/gpt-4.1-nano")
    assert response.stop_reason.stop_reason == "end_turn"
    models = [r.body.get("model") for r in fake.requests[seen:] if r.path.endswith("/completions")]
    assert models == ["gpt-4.1-nano"]
    assert client.agents.retrieve(agent.id).model == "openai/gpt-4o-mini"  # unchanged

    with pytest.raises(letta_client.BadRequestError, match="unknown model"):
        client.agents.messages.create(agent.id, input="x", override_model="nope/model")


def test_a_deleted_or_unknown_agent_is_404_for_every_message_route(
        client: Letta, script: Script, server: Server) -> None:
    agent = new_agent(client, name="short-lived")
    script.set(reply("hi"))
    client.agents.messages.create(agent.id, input="hello")  # live in the server now
    client.agents.delete(agent.id)
    for agent_id in (agent.id, "short-lived", "agent-unknown"):
        with pytest.raises(letta_client.NotFoundError):
            client.agents.messages.create(agent_id, input="hello again")
        with pytest.raises(letta_client.NotFoundError):
            client.agents.messages.cancel(agent_id)
        with pytest.raises(letta_client.NotFoundError):
            client.agents.messages.list(agent_id)
        assert httpx.get(f"{server.url}/v1/agents/{agent_id}/context").status_code == 404
    assert len(script.requests) == 1
