"""What ``POST /v1/agents`` and ``GET /v1/agents`` do with Letta's fields, through letta-client:
names that repeat, search by name, and every create field honoured or refused by name."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from typing import Any

import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.cli.exits import AmbiguousName
from stateloop.cli.remote import RemoteBackend
from stateloop.testing import reply
from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)


def test_names_repeat_and_a_shared_name_is_never_guessed(client: Letta,
                                                        server: Server) -> None:
    first = new_agent(client, name="twin")
    second = new_agent(client, name="twin")
    assert first.id != second.id
    assert [a.id for a in client.agents.list(name="twin")] == [second.id, first.id]
    renamed = new_agent(client, name="solo")
    assert client.agents.update(renamed.id, name="twin").name == "twin"
    assert client.agents.retrieve(first.id).name == "twin"
    # The CLI names every agent sharing the name, with ids, rather than pick one.
    backend = RemoteBackend(server.url)
    try:
        with pytest.raises(AmbiguousName, match="3 agents are named 'twin'") as refused:
            backend.show_agent("twin")
        assert all(a.id in str(refused.value) for a in (first, second, renamed))
        assert backend.show_agent(first.id)["id"] == first.id
    finally:
        backend.close()


def test_query_text_finds_agents_by_part_of_the_name(client: Letta) -> None:
    made = [new_agent(client, name=name, tags=["qt"])
            for name in ("Billing Helper", "billing-bot", "Support")]
    found = client.agents.list(query_text="BILLING", tags=["qt"])
    assert [a.id for a in found] == [made[1].id, made[0].id]
    assert [a.id for a in client.agents.list(query_text="port", tags=["qt"])] == [made[2].id]
    both = client.agents.list(query_text="billing", tags=["qt", "none"], match_all_tags=True)
    assert list(both) == []


def test_embedding_config_is_null_unless_asked_and_then_the_one_asked_for(
        client: Letta) -> None:
    plain = new_agent(client)
    assert plain.embedding_config is None and plain.embedding is None
    asked = new_agent(client, embedding="openai/text-embedding-3-small")
    assert asked.embedding == "openai/text-embedding-3-small"
    assert asked.embedding_config is not None
    assert (asked.embedding_config.embedding_model, asked.embedding_config.embedding_dim) == (
        "text-embedding-3-small", 1536)
    assert client.agents.retrieve(asked.id).embedding == "openai/text-embedding-3-small"
    large = new_agent(client, embedding="openai/text-embedding-3-large")
    assert large.embedding_config is not None and large.embedding_config.embedding_dim == 3072
    with pytest.raises(letta_client.UnprocessableEntityError,
                       match=r"ollama.*OLLAMA_BASE_URL") as info:
        new_agent(client, embedding="ollama/nomic-embed-text")
    assert "embedding" in str(info.value.body)


def test_model_settings_are_applied_and_invalid_ones_refused(
        client: Letta, script: Script) -> None:
    agent = new_agent(client, include_base_tools=True, model_settings={"provider_type": "openai",
                                              "max_output_tokens": 321,
                                              "parallel_tool_calls": False},
                      response_format={"type": "text"})
    assert agent.llm_config.max_tokens == 321 and agent.llm_config.parallel_tool_calls is False
    assert _plain(agent.model_settings) == {"provider_type": "openai", "max_output_tokens": 321,
                                            "parallel_tool_calls": False}
    assert _plain(agent.response_format) == {"type": "text"}
    script.set(reply("ok"))
    client.agents.messages.create(agent.id, input="hi")
    sent = script.requests[-1]
    assert (sent.max_tokens, sent.parallel_tool_calls) == (321, False)
    client.agents.update(agent.id, model_settings={"provider_type": "openai",
                                                   "max_output_tokens": 99})
    script.set(reply("ok"))
    client.agents.messages.create(agent.id, input="again")
    assert script.requests[-1].max_tokens == 99
    refused: list[tuple[dict[str, Any], str]] = [
        ({"model_settings": {"provider_type": "openai", "temperature": 5}}, "temperature"),
        ({"response_format": {"type": "xml"}}, "response_format")]
    for body, field in refused:
        with pytest.raises(letta_client.UnprocessableEntityError, match=field):
            new_agent(client, **body)
        with pytest.raises(letta_client.UnprocessableEntityError, match=field):
            client.agents.update(agent.id, **body)
    assert client.agents.retrieve(agent.id).llm_config.max_tokens == 99


def test_initial_message_sequence_opens_the_context(client: Letta, script: Script) -> None:
    agent = new_agent(client, initial_message_sequence=[
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Nice to meet you, Ada."}])
    assert len(agent.message_ids or []) == 3
    script.set(reply("You are Ada."))
    client.agents.messages.create(agent.id, input="Who am I?")
    texts = [(m.role, m.text) for m in script.requests[-1].messages]
    assert texts[1:] == [("user", "My name is Ada."), ("assistant", "Nice to meet you, Ada."),
                         ("user", "Who am I?")]


def test_repeated_tool_rules_are_merged(client: Letta) -> None:
    rule = {"type": "exit_loop", "tool_name": "send_message"}
    agent = new_agent(client, tools=["send_message"], tool_rules=[rule, rule,
                      {"type": "run_first", "tool_name": "send_message"}, dict(rule)])
    assert [(r.type, r.tool_name) for r in agent.tool_rules or []] == [
        ("exit_loop", "send_message"), ("run_first", "send_message")]
    changed = client.agents.update(agent.id, tool_rules=[rule, rule])
    assert [(r.type, r.tool_name) for r in changed.tool_rules or []] == [
        ("exit_loop", "send_message")]


def test_blocks_default_to_lettas_limit(client: Letta) -> None:
    agent = new_agent(client)
    assert [b.limit for b in agent.blocks] == [100_000]
    assert client.blocks.create(label="org", value="ACME").limit == 100_000


def _plain(value: Any) -> Any:
    """A field letta-client parsed into a model or left a dict, as a dict of what was set."""
    return value.model_dump(exclude_unset=True) if hasattr(value, "model_dump") else value
