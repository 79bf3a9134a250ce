"""Lone surrogates ("\\ud800"): from a model or a tool they are stored as U+FFFD and the agent
goes on; in what a caller gives (run input, blocks) they are refused by name."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from letta_client import Letta

from stateloop import Agent, Block, tool
from stateloop.llm.retry import RetryPolicy
from stateloop.store import open_store
from stateloop.testing import ScriptedModel, calls, reply
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, raw_call
from test_server_support import Script, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

PROVIDERS = pytest.mark.parametrize("model", ["openai/gpt-4o-mini",
                                              "anthropic/claude-haiku-4-5"])
LONE = "\ud800"
FFFD = "\ufffd"


@tool
def echo_back(text: str) -> str:
    """Repeat the text."""
    return text


@tool
def lone() -> str:
    """Answer with a lone surrogate."""
    return f"bad {LONE} output"


@tool
def fail_lonely() -> str:
    """Fail with a lone surrogate in the error."""
    raise RuntimeError(f"broken {LONE}")


def no_surrogates(text: str) -> bool:
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@PROVIDERS
async def test_lone_surrogates_from_the_model_and_tools_are_stored_as_replacement_characters(
        model: str, tmp_path: Path, fast_retry: RetryPolicy) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    script = [
        reply(f"thinking {LONE}"),
        calls(call("echo_back", text=f"arg {LONE}"),  # escaped in the JSON arguments
              raw_call("echo_back", f'{{"text": "raw {LONE}"}}'),  # there as itself
              call("lone"), call("fail_lonely")),
        reply(f"said {LONE}"),
        reply("fine"),
    ]
    with FakeOpenAI(script) as fake:
        agent = await Agent.acreate(model, store=url, name="ada", base_url=fake.base_url,
                                    api_key="test-key", retry=fast_retry,
                                    tools=[echo_back, lone, fail_lonely])
        first = await agent.run("hello")
        assert (first.stop_reason, first.output) == ("end_turn", f"thinking {FFFD}")
        second = await agent.run("go")
        assert (second.stop_reason, second.output) == ("end_turn", f"said {FFFD}")
        results = [m.text for m in second.messages if m.role == "tool"]
        assert results[:3] == [f"arg {FFFD}", f"raw {FFFD}", f"bad {FFFD} output"]
        assert f"broken {FFFD}" in results[3]
        [calling] = [m for m in second.messages if m.tool_calls]
        assert [c.arguments for c in calling.tool_calls[:2]] == [{"text": f"arg {FFFD}"},
                                                                 {"text": f"raw {FFFD}"}]
        assert (await agent.run("again")).output == "fine"

    elsewhere = await open_store(url)
    try:
        stored = await elsewhere.list_messages(agent.id, limit=100)
        assert [m.id for m in stored][-len(second.messages) - 2:-2] == [
            m.id for m in second.messages]
        for message in stored:
            assert no_surrogates(message.text)
            for tool_call in message.tool_calls:
                assert no_surrogates(str(tool_call.arguments))
                assert no_surrogates(tool_call.raw_arguments or "")
    finally:
        await elsewhere.close()


async def test_a_caller_giving_lone_surrogates_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="block 'human': value holds a lone surrogate"):
        Block("human", f"Name: {LONE}")
    with pytest.raises(ValueError, match="block 'human': description"):
        Block("human", "", description=LONE)

    agent = await Agent.acreate(ScriptedModel([reply("ok")]), name="ada",
                                store=f"sqlite:///{tmp_path / 'a.db'}",
                                blocks=[Block("human", "")])
    with pytest.raises(ValueError, match=r"input message 0: text holds a lone surrogate "
                                         r"\(U\+D800\) at character 3"):
        await agent.run(f"hi {LONE}")
    agent.blocks[0].value = LONE
    with pytest.raises(ValueError, match="block 'human': value"):
        agent.memory_changed(agent.blocks[0])
    agent.blocks[0].value = "Name: Ada"
    agent.memory_changed(agent.blocks[0])
    assert (await agent.run("hi")).output == "ok"  # nothing was half taken


LONE_SOURCE = '''
def lone_reply(text: str) -> str:
    """Answer with a lone surrogate, or fail with one.

    Args:
        text: What to answer with.
    """
    if text == "fail":
        raise RuntimeError("broken \\ud800")
    return "bad \\ud800 " + text
'''


def test_lone_surrogates_from_a_sandboxed_tool_reach_a_letta_client_as_replacement_characters(
        client: Letta, script: Script) -> None:
    client.tools.create(source_code=LONE_SOURCE)
    agent = new_agent(client, tools=["lone_reply"])
    script.set(calls(call("lone_reply", text=f"x {LONE}"), call("lone_reply", text="fail")),
               reply("done"))
    response = client.agents.messages.create(agent.id, input="go")
    assert response.stop_reason.stop_reason == "end_turn"
    returns = [r.tool_return for m in response.messages  # the step's results: one message
               if m.message_type == "tool_return_message" for r in m.tool_returns]  # type: ignore
    assert returns[0] == f"bad {FFFD} x {FFFD}"
    assert f"broken {FFFD}" in returns[1]  # type: ignore[operator]
    stored = [r.tool_return for m in client.agents.messages.list(agent.id)
              if m.message_type == "tool_return_message" for r in m.tool_returns]  # type: ignore
    assert stored == returns


def test_lone_surrogates_from_the_model_reach_a_letta_client_as_replacement_characters(
        client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply(f"hello {LONE}"))
    response = client.agents.messages.create(agent.id, input="hi")
    assert response.stop_reason.stop_reason == "end_turn"
    assert [getattr(m, "content", None) for m in response.messages] == [f"hello {FFFD}"]
    script.set(reply(f"streamed {LONE}"))
    frames: list[Any] = list(client.agents.messages.create(agent.id, input="again",
                                                           streaming=True))
    assert f"streamed {FFFD}" in [getattr(f, "content", None) for f in frames]
    history = [getattr(m, "content", None) for m in client.agents.messages.list(agent.id)]
    assert f"hello {FFFD}" in history and f"streamed {FFFD}" in history


async def test_the_store_never_fails_a_step_for_a_lone_surrogate(tmp_path: Path) -> None:
    # A model that is no provider adapter (here the scripted one) may hand them over as is.
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    agent = await Agent.acreate(ScriptedModel([call("echo_back", text=LONE), reply(LONE),
                                               reply("fine")]),
                                store=url, name="ada", tools=[echo_back])
    result = await agent.run("go")
    assert result.stop_reason == "end_turn"
    assert (await agent.run("again")).output == "fine"
    elsewhere = await open_store(url)
    try:
        stored = await elsewhere.list_messages(agent.id)
        assert [m.text for m in stored if m.role in ("tool", "assistant")][-3:] == [
            FFFD, FFFD, "fine"]
        [calling] = [m for m in stored if m.tool_calls]
        assert calling.tool_calls[0].arguments == {"text": FFFD}
    finally:
        await elsewhere.close()


async def test_a_memory_edit_holding_a_lone_surrogate_is_refused_and_changes_nothing() -> None:
    # A model that is no provider adapter may hand one over as is.
    model = ScriptedModel([call("memory_replace", label="human", old_string="Ada",
                                new_string=f"A{LONE}"), reply("done")])
    agent = Agent(model=model, blocks=[Block("human", "Name: Ada")])
    result = await agent.run("go")
    [refusal] = [m for m in result.messages if m.role == "tool"]
    assert refusal.is_error and "lone surrogate" in refusal.text
    assert agent.blocks[0].value == "Name: Ada"
