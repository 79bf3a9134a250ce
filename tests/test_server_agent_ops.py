"""Operations on one agent beyond messaging, through letta-client (its method where it has
one, its generic ``post``/``patch`` otherwise): summarize now, edit a stored message, preview
the next provider request, a one-off completion, run one of its tools. Every answer is
checked against Letta's document."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from typing import Any

import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from letta_spec import assert_letta_shape
from stateloop.testing.scripted import call, error, reply
from test_server_support import client, fake, new_agent, script, server  # noqa: F401 (fixtures)

MISSING_AGENT = "agent-00000000-0000-4000-8000-000000000000"

SHOUT = '''
def shout(text: str) -> str:
    """Say it loudly.

    Args:
        text: What to say.
    """
    return text.upper()
'''


def _post(client: Letta, path: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(path, cast_to=object, body=body)


def _messages(client: Letta, agent_id: str) -> list[Any]:
    return list(client.agents.messages.list(agent_id, order="asc", limit=100))


# -- summarize ----------------------------------------------------------------------------


def test_summarize_moves_old_turns_into_a_summary(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    for text in ("I am Ada.", "I like tea.", "I live in London."):
        script.set(reply("Noted."))
        client.agents.messages.create(agent.id, input=text)
    before = client.agents.retrieve(agent.id).message_ids
    script.set(reply("Ada likes tea and lives in London."))
    result = client.agents.messages.compact(agent.id)
    assert result.num_messages_before == len(before) == 7
    assert result.num_messages_after < result.num_messages_before
    assert "Ada likes tea" in result.summary
    assert len(client.agents.retrieve(agent.id).message_ids) == result.num_messages_after
    assert "I am Ada." in script.requests[-1].messages[-1].text  # the summarizer read it
    assert_letta_shape("/v1/agents/{agent_id}/summarize", "post", result.model_dump())


def test_summarize_with_nothing_to_compact_is_letta_s_400(client: Letta) -> None:
    agent = new_agent(client)
    with pytest.raises(letta_client.BadRequestError) as refused:
        client.agents.messages.compact(agent.id, compaction_settings={"mode": "all"})
    assert "Summarization failed to reduce the number of messages" in str(refused.value)
    assert len(client.agents.retrieve(agent.id).message_ids) == 1
    with pytest.raises(letta_client.NotFoundError):
        client.agents.messages.compact(MISSING_AGENT)


# -- edit a message -----------------------------------------------------------------------


def _patch(client: Letta, agent_id: str, message_id: str, body: dict[str, Any]) -> Any:
    return client.patch(f"/v1/agents/{agent_id}/messages/{message_id}", cast_to=object,
                        body=body)


def test_edited_user_message_is_stored_searched_and_sent(client: Letta,
                                                         script: Script) -> None:
    agent = new_agent(client, tools=["conversation_search"])
    script.set(reply("Tea it is."))
    client.agents.messages.create(agent.id, input="I like tea.")
    [mine] = [m for m in _messages(client, agent.id) if m.message_type == "user_message"]
    edited = _patch(client, agent.id, mine.id,
                    {"message_type": "user_message", "content": "I like coffee."})
    assert edited["message_type"] == "user_message" and edited["content"] == "I like coffee."
    assert edited["id"] == mine.id
    assert_letta_shape("/v1/agents/{agent_id}/messages/{message_id}", "patch", edited)
    stored = client.messages.retrieve(mine.id)
    assert [m.content for m in stored if m.message_type == "user_message"] == [
        "I like coffee."]
    found = client.agents.tools.run("conversation_search", agent_id=agent.id,
                                    args={"query": "coffee"})
    assert found.status == "success" and "I like coffee." in str(found.func_return)
    gone = client.agents.tools.run("conversation_search", agent_id=agent.id,
                                   args={"query": "tea"})
    assert "I like tea." not in str(gone.func_return)
    script.set(reply("Coffee, then."))
    client.agents.messages.create(agent.id, input="What do I like?")
    sent = [m.text for m in script.requests[-1].messages if m.role == "user"]
    assert "I like coffee." in sent and "I like tea." not in sent


def test_assistant_reasoning_and_system_edits(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("Paris.", reasoning="The capital of France."))
    client.agents.messages.create(agent.id, input="Capital of France?")
    listed = {m.message_type: m for m in _messages(client, agent.id)}
    answer = _patch(client, agent.id, listed["assistant_message"].id,
                    {"message_type": "assistant_message", "content": "Paris, France."})
    assert answer["content"] == "Paris, France."
    thought = _patch(client, agent.id, listed["reasoning_message"].id,
                     {"message_type": "reasoning_message", "reasoning": "Easy one."})
    assert thought["message_type"] == "reasoning_message" and thought["reasoning"] == "Easy one."
    assert_letta_shape("/v1/agents/{agent_id}/messages/{message_id}", "patch", thought)
    after = {m.message_type: m for m in _messages(client, agent.id)}
    assert after["assistant_message"].content == "Paris, France."
    assert after["reasoning_message"].reasoning == "Easy one."
    system = _patch(client, agent.id, listed["system_message"].id,
                    {"message_type": "system_message", "content": "You answer in one word."})
    assert system["content"] == "You answer in one word."
    script.set(reply("Berlin."))
    client.agents.messages.create(agent.id, input="And Germany?")
    request = script.requests[-1].messages
    assert request[0].text == "You answer in one word."
    assert any(m.role == "assistant" and m.text == "Paris, France." for m in request)


def test_edit_errors_name_the_problem(client: Letta, script: Script) -> None:
    agent, other = new_agent(client), new_agent(client)
    script.set(reply("Hello."))
    client.agents.messages.create(agent.id, input="Hi.")
    listed = {m.message_type: m for m in _messages(client, agent.id)}
    for kind in ("user_message", "reasoning_message"):  # another agent's: not found at all
        with pytest.raises(letta_client.NotFoundError, match="has no message"):
            _patch(client, other.id, listed["user_message"].id,
                   {"message_type": kind, "content": "Mine now.", "reasoning": "Mine."})
    with pytest.raises(letta_client.UnprocessableEntityError, match="user_message") as exc:
        _patch(client, agent.id, listed["user_message"].id,
               {"message_type": "assistant_message", "content": "Swapped."})
    assert exc.value.status_code == 422
    with pytest.raises(letta_client.UnprocessableEntityError, match="reasoning"):
        _patch(client, agent.id, listed["assistant_message"].id,
               {"message_type": "reasoning_message"})
    with pytest.raises(letta_client.NotFoundError):
        _patch(client, MISSING_AGENT, listed["user_message"].id, {"content": "x"})
    # Nothing changed.
    assert _messages(client, agent.id)[1].content == "Hi."


# -- the next request, and a one-off completion --------------------------------------------


def test_preview_shows_the_provider_body_and_stores_nothing(client: Letta,
                                                           script: Script) -> None:
    tool = client.tools.upsert(source_code=SHOUT)
    agent = new_agent(client, tool_ids=[tool.id])
    script.set(reply("Hello."))
    client.agents.messages.create(agent.id, input="Hi.")
    before = [m.id for m in _messages(client, agent.id)]
    calls = len(script.requests)
    body = _post(client, f"/v1/agents/{agent.id}/messages/preview-raw-payload",
                 {"messages": [{"role": "user", "content": "Shout hello."}],
                  "client_tools": [{"name": "ask_human", "description": "Ask the user.",
                                    "parameters": {"type": "object", "properties": {}}}]})
    assert_letta_shape("/v1/agents/{agent_id}/messages/preview-raw-payload", "post", body)
    assert body["model"] == "gpt-4o-mini" and body["stream"] is True
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]
    assert body["messages"][-1]["content"] == "Shout hello."
    assert "Name: Ada" in body["messages"][0]["content"]
    names = {t["function"]["name"] for t in body["tools"]}
    assert names == {"shout", "ask_human"}
    assert len(script.requests) == calls  # sent nowhere
    assert [m.id for m in _messages(client, agent.id)] == before
    with pytest.raises(letta_client.UnprocessableEntityError, match="messages"):
        _post(client, f"/v1/agents/{agent.id}/messages/preview-raw-payload", {})


def test_generate_is_a_one_off_completion(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("Bonjour."))
    result = _post(client, f"/v1/agents/{agent.id}/generate",
                   {"prompt": "Say hello in French.", "system_prompt": "Be brief."})
    assert_letta_shape("/v1/agents/{agent_id}/generate", "post", result)
    assert result["content"] == "Bonjour." and result["model"] == "gpt-4o-mini"
    assert result["usage"]["total_tokens"] > 0
    sent = script.requests[-1]
    assert [(m.role, m.text) for m in sent.messages] == [("system", "Be brief."),
                                                         ("user", "Say hello in French.")]
    assert sent.tools == []
    assert [m.message_type for m in _messages(client, agent.id)] == ["system_message"]
    script.set(call("structured_output", city="Paris", population=2))
    shaped = _post(client, f"/v1/agents/{agent.id}/generate",
                   {"prompt": "Biggest French city?", "response_schema": {
                       "type": "object", "properties": {"city": {"type": "string"},
                                                        "population": {"type": "integer"}}}})
    assert json.loads(shaped["content"]) == {"city": "Paris", "population": 2}
    forced = script.requests[-1]
    assert [t.name for t in forced.tools] == ["structured_output"]
    assert forced.tools[0].parameters["required"] == ["city", "population"]


def test_generate_errors(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    with pytest.raises(letta_client.UnprocessableEntityError):
        _post(client, f"/v1/agents/{agent.id}/generate", {"prompt": ""})
    with pytest.raises(letta_client.NotFoundError):
        _post(client, f"/v1/agents/{agent.id}/generate",
              {"prompt": "Hi", "override_model": "nowhere/nothing"})
    with pytest.raises(letta_client.NotFoundError):
        _post(client, f"/v1/agents/{MISSING_AGENT}/generate", {"prompt": "Hi"})
    script.set(error("authentication"))
    with pytest.raises(letta_client.APIStatusError, match="LLM provider error") as exc:
        _post(client, f"/v1/agents/{agent.id}/generate", {"prompt": "Hi"})
    assert exc.value.status_code == 502


# -- run one of its tools -----------------------------------------------------------------


def test_run_tool_for_agent(client: Letta) -> None:
    tool = client.tools.upsert(source_code=SHOUT)
    agent = new_agent(client, tool_ids=[tool.id], tools=["memory_insert"])
    result = client.agents.tools.run("shout", agent_id=agent.id, args={"text": "hi"})
    assert (result.status, result.func_return) == ("success", "HI")
    assert_letta_shape("/v1/agents/{agent_id}/tools/{tool_name}/run", "post",
                       result.model_dump())
    failed = client.agents.tools.run("shout", agent_id=agent.id, args={})
    assert failed.status == "error" and failed.func_return is None
    edit = client.agents.tools.run("memory_insert", agent_id=agent.id,
                                   args={"label": "human", "new_string": "Likes tea."})
    assert edit.status == "success", edit
    assert "Likes tea." in client.agents.blocks.retrieve("human", agent_id=agent.id).value
    assert all(m.message_type == "system_message" for m in _messages(client, agent.id))
    other = client.tools.upsert(source_code=SHOUT.replace("shout", "whisper"))
    with pytest.raises(letta_client.NotFoundError, match="not attached"):
        client.agents.tools.run(other.name, agent_id=agent.id, args={})
