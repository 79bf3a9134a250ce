"""Letta 0.16.8's behaviour where a ported client depends on it, through letta-client (httpx
where the client has no call): a small context window, conversations' message order,
system prompt and errors, blocks reaching a memory agent, ``generate``'s checks and
"not found", a client tool's result after a cancel, compaction with ``mode: all``."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from typing import Any

import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.testing import call, reply
from test_server_support import client, fake, new_agent, script, server  # noqa: F401 (fixtures)

UNKNOWN = "agent-00000000-0000-4000-8000-000000000000"


def frames(client: Letta, conversation_id: str, text: str) -> list[Any]:
    return list(client.conversations.messages.create(conversation_id, input=text,
                                                     include_pings=False))


def test_a_small_context_window_is_taken_and_one_too_small_for_the_prompt_is_a_4xx(
        client: Letta, script: Script) -> None:
    script.set(reply("fits"), reply("fits again"))
    agent = new_agent(client, context_window_limit=3000, include_base_tools=True)
    assert agent.llm_config.context_window == 3000
    assert client.agents.messages.create(agent.id, input="hello").messages[-1].content == "fits"
    # an answer cap above the window (Letta's 4,096 default) keeps half of it, not all
    capped = new_agent(client, context_window_limit=3000, include_base_tools=True,
                       max_tokens=4096)
    answer = client.agents.messages.create(capped.id, input="hello")
    assert answer.messages[-1].content == "fits again"
    with pytest.raises(letta_client.UnprocessableEntityError) as refused:
        new_agent(client, context_window_limit=200, system="words " * 400)
    assert "context_window_limit" in str(refused.value)
    assert "cannot hold the system prompt" in str(refused.value)
    # a PATCH changes the window, and refuses one too small, changing nothing
    assert client.agents.update(agent.id, context_window_limit=4000).llm_config.context_window \
        == 4000
    with pytest.raises(letta_client.UnprocessableEntityError) as shrunk:
        client.agents.update(agent.id, context_window_limit=300)
    assert "context_window_limit" in str(shrunk.value)
    assert client.agents.retrieve(agent.id).llm_config.context_window == 4000
    # a window that a grown block no longer fits stops the run with a 400 naming it
    small = new_agent(client, context_window_limit=400)
    client.agents.blocks.update("human", agent_id=small.id, value="fact " * 600)
    with pytest.raises(letta_client.BadRequestError) as overflow:
        client.agents.messages.create(small.id, input="hello")
    assert "context_window_overflow_in_system_prompt" in str(overflow.value)


def test_conversation_messages_come_newest_first_with_order_desc(
        client: Letta, script: Script) -> None:
    script.set(reply("one"), reply("two"))
    agent = new_agent(client)
    thread = client.conversations.create(agent_id=agent.id)
    frames(client, thread.id, "first")
    frames(client, thread.id, "second")
    newest = client.conversations.messages.list(thread.id, order="desc").items
    oldest = client.conversations.messages.list(thread.id, order="asc").items
    assert [m.id for m in newest] == [m.id for m in reversed(oldest)]
    texts = [m.content for m in newest if m.message_type == "user_message"]
    assert texts == ["second", "first"]
    page = client.conversations.messages.list(thread.id, order="desc", limit=2).items
    assert [m.content for m in page] == ["two", "second"]


def test_recompile_puts_the_new_system_message_first(client: Letta, script: Script) -> None:
    script.set(reply("ok"))
    agent = new_agent(client)
    thread = client.conversations.create(agent_id=agent.id)
    frames(client, thread.id, "hi")
    client.agents.blocks.update("human", agent_id=agent.id, value="Name: Grace")
    prompt = client.conversations.recompile(thread.id)
    assert "Name: Grace" in prompt
    listed = client.conversations.messages.list(thread.id, order="asc").items
    assert [m.message_type for m in listed].count("system_message") == 1
    assert listed[0].message_type == "system_message"
    assert "Name: Grace" in listed[0].content


def test_a_conversation_made_after_a_block_edit_is_compiled_with_the_new_value(
        client: Letta, script: Script) -> None:
    script.set(reply("ok"))
    agent = new_agent(client)
    client.agents.blocks.update("human", agent_id=agent.id, value="Name: Grace")
    thread = client.conversations.create(agent_id=agent.id)
    prompt = client.conversations.recompile(thread.id, dry_run=True)
    assert "Name: Grace" in prompt and "Name: Ada" not in prompt
    frames(client, thread.id, "hi")
    assert "Name: Grace" in script.requests[-1].messages[0].text
    human = next(b for b in client.agents.blocks.list(agent.id) if b.label == "human")
    client.blocks.update(human.id, value="Name: Hopper")  # by the block's own id
    later = client.conversations.create(agent_id=agent.id)
    script.set(reply("ok"))
    frames(client, later.id, "hi")
    assert "Name: Hopper" in script.requests[-1].messages[0].text
    listed = client.conversations.messages.list(later.id, order="asc").items
    assert "Name: Hopper" in listed[0].content


def test_compacting_an_empty_conversation_is_letta_s_400(client: Letta) -> None:
    agent = new_agent(client)
    thread = client.conversations.create(agent_id=agent.id)
    with pytest.raises(letta_client.BadRequestError) as refused:
        client.conversations.messages.compact(thread.id)
    assert "Summarization failed to reduce the number of messages" in str(refused.value)


def test_compaction_in_all_mode_leaves_the_system_prompt_and_the_summary(
        client: Letta, script: Script) -> None:
    agent = new_agent(client)
    thread = client.conversations.create(agent_id=agent.id)
    for text in ("I am Ada.", "I like tea.", "I live in London."):
        script.set(reply("Noted."))
        client.agents.messages.create(agent.id, input=text)
        frames(client, thread.id, text)
    script.set(reply("Ada likes tea."))
    result = client.agents.messages.compact(agent.id, compaction_settings={"mode": "all"})
    assert (result.num_messages_before, result.num_messages_after) == (7, 2)
    assert "Ada likes tea." in result.summary
    assert len(client.agents.retrieve(agent.id).message_ids) == 2
    script.set(reply("Ada likes tea."))
    result = client.conversations.messages.compact(
        thread.id, compaction_settings={"mode": "all"})
    assert (result.num_messages_before, result.num_messages_after) == (7, 2)
    assert len(client.conversations.retrieve(thread.id).in_context_message_ids) == 2
    with pytest.raises(letta_client.BadRequestError):  # nothing left to send
        client.conversations.messages.compact(thread.id, compaction_settings={"mode": "all"})


def test_replaying_a_finished_run_s_stream_is_letta_s_400(client: Letta,
                                                          script: Script) -> None:
    script.set(reply("ok"))
    agent = new_agent(client)
    thread = client.conversations.create(agent_id=agent.id)
    frames(client, thread.id, "hi")
    with pytest.raises(letta_client.BadRequestError) as refused:
        list(client.conversations.messages.stream(thread.id))
    assert "No active runs found for this conversation." in str(refused.value)


def test_a_block_attached_to_an_agent_with_sleeptime_reaches_its_memory_agent(
        client: Letta) -> None:
    agent = new_agent(client, enable_sleeptime=True)
    memory_id = agent.multi_agent_group.agent_ids[0]
    block = client.blocks.create(label="project", value="Apollo")
    client.agents.blocks.attach(block.id, agent_id=agent.id)
    assert block.id in block_ids(client, memory_id)
    client.agents.blocks.attach(block.id, agent_id=agent.id)  # again: no second link
    assert block_ids(client, memory_id).count(block.id) == 1
    client.agents.blocks.detach(block.id, agent_id=agent.id)  # Letta detaches it there only
    assert block.id not in block_ids(client, agent.id)
    assert block.id in block_ids(client, memory_id)
    plain = new_agent(client)
    client.agents.blocks.attach(block.id, agent_id=plain.id)
    assert block.id in block_ids(client, plain.id)


def test_generate_refuses_a_blank_prompt_and_an_unknown_agent_is_not_found(
        client: Letta) -> None:
    agent = new_agent(client)
    with pytest.raises(letta_client.UnprocessableEntityError) as blank:
        client.post(f"/v1/agents/{agent.id}/generate", body={"prompt": " \n "},
                    cast_to=object)
    assert "prompt cannot be empty or whitespace-only" in str(blank.value)
    with pytest.raises(letta_client.NotFoundError) as unknown:
        client.post(f"/v1/agents/{UNKNOWN}/generate", body={"prompt": "hello"},
                    cast_to=object)
    assert "not found" in str(unknown.value)
    for call_one in (lambda: client.agents.retrieve(UNKNOWN),
                     lambda: client.agents.messages.create(UNKNOWN, input="hi"),
                     lambda: client.agents.blocks.list(UNKNOWN)):
        with pytest.raises(letta_client.NotFoundError) as found:
            call_one()
        assert "not found" in str(found.value)


WEATHER = {"name": "get_weather", "description": "The weather in a city now.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}


def test_a_client_tool_return_retried_after_a_cancel_continues_the_run(
        client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(call("get_weather", city="Paris"))
    paused = client.agents.messages.create(agent.id, input="Weather in Paris?",
                                           client_tools=[WEATHER])
    call_id = paused.messages[-1].tool_call.tool_call_id  # type: ignore[union-attr]
    run_id = paused.messages[-1].run_id
    assert client.agents.messages.cancel(agent.id) == {run_id: "cancelled"}
    state = client.agents.retrieve(agent.id, include=["agent.pending_approval"])
    assert state.pending_approval is None  # denied, as in Letta
    assert client.runs.retrieve(run_id).status == "cancelled"
    script.set(reply("Carrying on."))
    retried = client.agents.messages.create(agent.id, client_tools=[WEATHER], messages=[
        {"type": "approval", "approvals": [{"type": "tool", "tool_call_id": call_id,
                                            "status": "success", "tool_return": "sunny"}]}])
    assert retried.stop_reason.stop_reason == "end_turn"
    assert retried.messages[-1].content == "Carrying on."
    sent = script.requests[-1].messages
    assert "keep-alive" in sent[-1].text and sent[-1].role == "user"
    assert sum(1 for m in sent if m.role == "tool") == 1  # the denial answers the call once


def block_ids(client: Letta, agent_id: str) -> list[str]:
    """The ids of the agent's blocks (a 1.x client asks for them: ``include``)."""
    return [b.id for b in client.agents.retrieve(agent_id, include=["agent.blocks"]).blocks]
