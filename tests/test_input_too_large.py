"""Input larger than the context window leaves for it: refused before the model is called,
nothing stored, the agent fine afterwards — in the library and over REST (letta-client)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from pathlib import Path

import httpx
import letta_client
import pytest
from letta_client import Letta

from stateloop import Agent, Block, InputTooLarge
from stateloop.agent_options import check_fits
from stateloop.llm.tokens import MESSAGE_OVERHEAD, count_tokens, message_tokens
from stateloop.memory.compaction import tool_tokens
from stateloop.messages import system, user
from stateloop.testing import ScriptedModel, reply
from test_server_support import Script, Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

MODEL = "gpt-4o-mini"  # counted exactly (o200k_base)


def words(tokens: int) -> str:
    """A text of exactly ``tokens`` tokens."""
    text = "the" + " the" * (tokens - 1)
    assert count_tokens(text, MODEL) == tokens
    return text


def agent_with(window: int, **options: object) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(lambda request: reply("ok"), name=MODEL, context_window=window)
    agent = Agent(model=model, system="You are helpful.", blocks=[Block("human", "Ada")],
                  **options)  # type: ignore[arg-type]
    return agent, model


def room_of(agent: Agent) -> int:
    """What the window leaves for input, as a caller can work it out."""
    fixed = (message_tokens(agent.messages[0], MODEL)
             + tool_tokens(agent.memory.tool_specs(), MODEL))
    return agent.context_window - agent.output_reserve - fixed


async def test_input_over_the_window_is_refused_before_the_model(tmp_path: Path) -> None:
    agent, model = agent_with(8_192, store=f"sqlite:///{tmp_path / 'a.db'}", name="ada")
    await agent.run("hello")
    before = [m.id for m in agent.messages]
    with pytest.raises(InputTooLarge) as refused:
        await agent.run(words(20_000))
    error = refused.value
    assert isinstance(error, ValueError)
    assert (error.tokens, error.window) == (20_000 + MESSAGE_OVERHEAD, 8_192)
    assert error.room == room_of(agent) and error.room < 8_192 - agent.output_reserve
    assert "20,004 tokens" in str(error) and "context window of 8,192" in str(error)
    with pytest.raises(InputTooLarge):
        async for _ in agent.stream(["a short one", "word " * 20_000]):
            pass
    assert len(model.requests) == 1  # only the first run's
    assert [m.id for m in agent.messages] == before
    # Nothing stored: another process sees the agent as it was, and it goes on.
    again = await Agent.aload("ada", store=f"sqlite:///{tmp_path / 'a.db'}", model=model)
    assert [m.id for m in again.messages] == before
    assert agent.store is not None
    assert [r.status for r in await agent.store.list_runs(agent.id)] == ["completed"]
    result = await agent.run("and now?")
    assert (result.stop_reason, result.output) == ("end_turn", "ok")


async def test_input_that_fills_the_room_exactly_is_sent() -> None:
    agent, model = agent_with(8_192)
    room = room_of(agent)
    with pytest.raises(InputTooLarge):
        await agent.run(words(room - MESSAGE_OVERHEAD + 1))
    result = await agent.run(words(room - MESSAGE_OVERHEAD))
    assert result.output == "ok"
    assert model.requests[-1].messages[-1].text.startswith("the the")


def test_run_sync_refuses_too() -> None:
    agent, model = agent_with(4_096)
    with pytest.raises(InputTooLarge, match="context window of 4,096"):
        agent.run_sync("x " * 10_000)
    assert not model.requests
    assert agent.run_sync("hi").output == "ok"


def test_a_cheap_bound_clears_most_input_uncounted() -> None:
    prompt, tools = system("Be brief."), []
    small, large = user(words(100)), user(words(3_000))
    check_fits([small], system=prompt, tools=tools, window=8_192, reserve=1_024, model=MODEL)
    assert small.token_count is None  # a token is at least a byte: 600 bytes surely fit
    check_fits([large], system=prompt, tools=tools, window=8_192, reserve=1_024, model=MODEL)
    assert large.token_count == 3_000 + MESSAGE_OVERHEAD  # counted, and kept for the store


async def test_a_system_prompt_too_large_is_its_own_stop() -> None:
    model = ScriptedModel([reply("never")], name=MODEL, context_window=2_000)
    agent = Agent(model=model, system=words(1_900), max_tokens=200)
    result = await agent.run("x " * 3_000)  # the prompt is the problem, not the input
    assert result.stop_reason == "context_window_overflow_in_system_prompt"
    assert not model.requests


# -- over REST -----------------------------------------------------------------------------

MEGABYTE = "All work and no play makes Jack a dull boy.\n" * 23_000  # ~1 MB, ~250k tokens


def test_rest_refuses_with_422_and_stores_nothing(client: Letta, script: Script,
                                                  server: Server) -> None:
    agent = new_agent(client)  # gpt-4o-mini: a 128k window
    script.set(reply("first"), reply("after"))
    client.agents.messages.create(agent.id, input="hello")
    stored = [m.id for m in client.agents.messages.list(agent.id, limit=100)]
    sends = [
        lambda: client.agents.messages.create(
            agent.id, messages=[{"role": "user", "content": MEGABYTE}]),
        lambda: list(client.agents.messages.create(agent.id, input=MEGABYTE, streaming=True)),
        lambda: client.agents.messages.create_async(
            agent.id, messages=[{"role": "user", "content": MEGABYTE}]),
    ]
    for send in sends:
        with pytest.raises(letta_client.UnprocessableEntityError,
                           match=r"context window of 128,000"):
            send()
    assert len(script.requests) == 1
    assert [m.id for m in client.agents.messages.list(agent.id, limit=100)] == stored
    assert len(list(client.runs.list(agent_id=agent.id))) == 1
    answer = client.agents.messages.create(agent.id, input="still there?")
    assert [m.content for m in answer.messages] == ["after"]  # type: ignore[union-attr]


@pytest.mark.parametrize("path", ["", "/stream", "/async"])
def test_rest_names_the_field(client: Letta, server: Server, path: str) -> None:
    agent = new_agent(client, context_window_limit=2_000)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for body, field in (({"input": words(3_000)}, "input"),
                            ({"messages": [{"role": "user", "content": words(3_000)}]},
                             "messages")):
            response = http.post(f"/v1/agents/{agent.id}/messages{path}", json=body)
            assert response.status_code == 422, response.text
            [error] = response.json()["detail"]
            assert error["loc"] == ["body", field]
            assert "3,004 tokens" in error["msg"] and "context window of 2,000" in error["msg"]
