"""``/v1/chat/completions`` and the voice path through the real ``openai`` package: an
agent's id as the model, its memory, tools and history applying, streamed and whole."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import httpx
import openai
import pytest
from letta_client import Letta

from fake_script import Script, held
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, error, reply
from test_server_support import Server, client, fake, new_agent, script, server, settings_for  # noqa: F401 (fixtures)


def chat(server: Server, api_key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=api_key, max_retries=0,
                         timeout=30)


def test_whole_answer_with_usage_and_history(server: Server, client: Letta,
                                             script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("Hello Ada."), reply("You said hi."))
    first = chat(server).chat.completions.create(
        model=agent.id, messages=[{"role": "user", "content": "Hi"}])
    assert first.object == "chat.completion"
    assert first.choices[0].message.role == "assistant"
    assert first.choices[0].message.content == "Hello Ada."
    assert first.choices[0].finish_reason == "stop"
    assert first.usage is not None and first.usage.total_tokens > 0
    assert first.model == agent.llm_config.model  # as Letta names it
    # The client resends the conversation; only its last user message is new input, and
    # the agent's own history (the first turn) is what the model sees.
    second = chat(server).chat.completions.create(model=agent.id, messages=[
        {"role": "system", "content": "ignored: the agent has its own"},
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello Ada."},
        {"role": "user", "content": [{"type": "text", "text": "What did I say?"}]}])
    assert second.choices[0].message.content == "You said hi."
    seen = [m.text for m in script.requests[-1].messages]
    assert seen.count("Hi") == 1 and "Hello Ada." in seen and seen[-1] == "What did I say?"
    assert "Name: Ada" in script.requests[-1].messages[0].text  # the agent's memory
    runs = client.runs.list(agent_id=agent.id)
    assert {f"chatcmpl-{r.id}" for r in runs} == {first.id, second.id}


def test_streamed_answer_ends_with_done(server: Server, client: Letta,
                                        script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("A streamed answer, in pieces."))
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", timeout=30, json={
            "model": agent.id, "stream": True,
            "messages": [{"role": "user", "content": "Go"}]}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [openai.types.chat.ChatCompletionChunk.model_validate_json(line[6:])
              for line in lines[:-1]]
    pieces = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert len(pieces) > 1  # token by token (the fake model sends 4 characters a chunk)
    assert "".join(pieces) == "A streamed answer, in pieces."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert {c.object for c in chunks} == {"chat.completion.chunk"}


def test_async_client_streams_with_usage(server: Server, client: Letta,
                                         script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("Async hello."))

    async def talk() -> tuple[str, int]:
        async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="unused",
                                      max_retries=0) as ai:
            stream = await ai.chat.completions.create(
                model=agent.id, stream=True, stream_options={"include_usage": True},
                messages=[{"role": "user", "content": "Hi"}])
            text, total = "", 0
            async for chunk in stream:
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
                if chunk.usage is not None:
                    total = chunk.usage.total_tokens
            return text, total

    text, total = asyncio.run(talk())
    assert text == "Async hello."
    assert total > 0


def test_tools_run_on_the_server_and_only_text_is_shown(server: Server, client: Letta,
                                                         script: Script) -> None:
    agent = new_agent(client, tools=["core_memory_append"])
    script.set(call("core_memory_append", label="human", content="Likes tea."),
               reply("Noted."))
    answer = chat(server).chat.completions.create(
        model=agent.id, messages=[{"role": "user", "content": "I like tea"}])
    assert answer.choices[0].message.content == "Noted."
    assert answer.choices[0].message.tool_calls is None
    human = client.agents.blocks.retrieve("human", agent_id=agent.id)
    assert "Likes tea." in human.value


def test_model_that_is_not_an_agent(server: Server, client: Letta) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        chat(server).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert "'model' field should contain an agent ID" in bad.value.message
    assert bad.value.param == "model"
    assert bad.value.response.json()["detail"].startswith("For this endpoint")  # Letta's
    with pytest.raises(openai.NotFoundError) as missing:
        chat(server).chat.completions.create(
            model="agent-00000000-0000-4000-8000-000000000000",
            messages=[{"role": "user", "content": "Hi"}])
    assert "agent-00000000-0000-4000-8000-000000000000" in missing.value.message


def test_bad_input_names_the_field(server: Server, client: Letta) -> None:
    agent = new_agent(client)
    ai = chat(server)
    with pytest.raises(openai.BadRequestError) as no_user:
        ai.chat.completions.create(model=agent.id,
                                   messages=[{"role": "system", "content": "Hi"}])
    assert no_user.value.param == "messages"
    with pytest.raises(openai.BadRequestError) as image:
        ai.chat.completions.create(model=agent.id, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}]}])
    assert image.value.param == "messages[0].content"
    for body, field in (({"messages": [{"role": "user", "content": "x"}]}, "model"),
                        ({"model": agent.id, "messages": []}, "messages"),
                        ({"model": agent.id, "messages": [{"role": "user", "content": "x"}],
                          "n": 2}, "n")):
        response = httpx.post(f"{server.url}/v1/chat/completions", json=body)
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"][-1] == field


def test_password_is_the_api_key(fake: FakeOpenAI, script: Script,
                                 tmp_path: pytest.TempPathFactory) -> None:
    settings = settings_for(fake, tmp_path / "auth.db",  # type: ignore[operator]
                            server_password="s3cret")
    with Server(settings) as secured:
        letta = Letta(base_url=secured.url, api_key="s3cret", max_retries=0)
        agent = new_agent(letta)
        script.set(reply("Signed in."))
        with pytest.raises(openai.AuthenticationError):
            chat(secured, "wrong").chat.completions.create(
                model=agent.id, messages=[{"role": "user", "content": "Hi"}])
        answer = chat(secured, "s3cret").chat.completions.create(
            model=agent.id, messages=[{"role": "user", "content": "Hi"}])
        assert answer.choices[0].message.content == "Signed in."


def test_dropped_stream_leaves_the_agent_whole(server: Server, client: Letta,
                                               script: Script) -> None:
    agent = new_agent(client)
    gate = threading.Event()
    script.set(held(gate, reply("Finished anyway.")), reply("Still here."))
    try:
        with chat(server).chat.completions.create(
                model=agent.id, stream=True,
                messages=[{"role": "user", "content": "Start"}]) as stream:
            stream.response.close()  # the client goes away mid-run
    finally:
        gate.set()
    answer = chat(server).chat.completions.create(  # queued behind the first run
        model=agent.id, messages=[{"role": "user", "content": "Again"}])
    assert answer.choices[0].message.content == "Still here."
    seen = [m.text for m in script.requests[-1].messages]
    assert "Finished anyway." in seen  # the dropped run's reply is in the history


def test_voice_path_streams_chunks(server: Server, client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("Voice answer."))
    stream = openai.OpenAI(base_url=f"{server.url}/v1/voice-beta/{agent.id}",
                           api_key="unused", max_retries=0).chat.completions.create(
        model="whatever-the-platform-sends", stream=True, user="caller-1",
        messages=[{"role": "user", "content": "Speak"}])
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "Voice answer."
    with pytest.raises(openai.NotFoundError):
        openai.OpenAI(base_url=f"{server.url}/v1/voice-beta/agent-missing",
                      api_key="unused", max_retries=0).chat.completions.create(
            model="x", stream=True, messages=[{"role": "user", "content": "Speak"}])
    refused = httpx.post(f"{server.url}/v1/voice-beta/{agent.id}/chat/completions",
                         json={"messages": "Speak"})
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "messages"]


def test_failed_run_is_an_error_the_client_raises(server: Server, client: Letta,
                                                  script: Script) -> None:
    agent = new_agent(client)
    script.set(error("invalid_request", "the model refused"))
    with pytest.raises(openai.APIError, match="the model refused"):
        for _ in chat(server).chat.completions.create(
                model=agent.id, stream=True, messages=[{"role": "user", "content": "Hi"}]):
            pass
    script.set(error("invalid_request", "the model refused"))
    with pytest.raises(openai.BadRequestError, match="provider was invalid"):  # Letta's
        chat(server).chat.completions.create(
            model=agent.id, messages=[{"role": "user", "content": "Hi"}])


def test_voice_turn_wakes_the_memory_agent(server: Server, client: Letta,
                                           script: Script) -> None:
    agent = new_agent(client, enable_sleeptime=True)
    group = agent.multi_agent_group
    assert group is not None
    client.patch(f"/v1/groups/{group.id}", cast_to=object, body={"manager_config": {
        "manager_type": "sleeptime", "sleeptime_agent_frequency": 1}})
    memory_id = group.agent_ids[0]
    script.set(reply("Voice answer."), reply("ok"))
    voice = openai.OpenAI(base_url=f"{server.url}/v1/voice-beta/{agent.id}",
                          api_key="unused", max_retries=0)
    stream = voice.chat.completions.create(model="voice", stream=True,
                                           messages=[{"role": "user", "content": "Speak"}])
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "Voice answer."
    for _ in range(400):  # the memory agent's run, after the turn, in the background
        if [r.status for r in client.runs.list(agent_id=memory_id)] == ["completed"]:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the memory agent never ran after the voice turn")
    assert "Speak" in str([m.text for m in script.requests[-1].messages])


def test_queued_behind_the_agents_run(server: Server, client: Letta, script: Script) -> None:
    agent = new_agent(client)
    gate = threading.Event()
    script.set(held(gate, reply("First.")), reply("Second."))
    answers: list[str | None] = []
    turn = threading.Thread(target=lambda: answers.append(chat(server).chat.completions.create(
        model=agent.id, messages=[{"role": "user", "content": "Next"}]
    ).choices[0].message.content))
    try:
        client.agents.messages.create_async(agent.id, input="Begin")
        turn.start()
        turn.join(0.5)
        assert turn.is_alive()  # waiting for the run in flight
    finally:
        gate.set()
    turn.join(30)
    assert answers == ["Second."]
    seen = [m.text for m in script.requests[-1].messages]
    assert seen[-3:] == ["Begin", "First.", "Next"]  # it ran after the first run's end


def test_on_postgresql_the_turn_is_stored(fake: FakeOpenAI, script: Script,
                                          tmp_path: pytest.TempPathFactory,
                                          pg_database: Callable[..., str]) -> None:
    settings = settings_for(fake, tmp_path / "unused.db",  # type: ignore[operator]
                            database_url=pg_database())
    with Server(settings) as on_pg:
        letta = Letta(base_url=on_pg.url, api_key="unused", max_retries=0)
        agent = new_agent(letta)
        script.set(reply("Stored in PostgreSQL."), reply("Whole too."))
        stream = chat(on_pg).chat.completions.create(
            model=agent.id, stream=True, messages=[{"role": "user", "content": "Hi"}])
        assert "".join(c.choices[0].delta.content or "" for c in stream) == (
            "Stored in PostgreSQL.")
        whole = chat(on_pg).chat.completions.create(
            model=agent.id, messages=[{"role": "user", "content": "Again"}])
        assert whole.choices[0].message.content == "Whole too."
        said = [m for m in letta.agents.messages.list(agent.id)
                if m.message_type in ("user_message", "assistant_message")]
        assert [m.message_type for m in said] == ["user_message", "assistant_message"] * 2
        assert [r.status for r in letta.runs.list(agent_id=agent.id)] == ["completed"] * 2


def test_answer_cut_at_the_token_limit_finishes_with_length(server: Server, client: Letta,
                                                            script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("Cut off mid", finish_reason="length"))
    answer = chat(server).chat.completions.create(
        model=agent.id, messages=[{"role": "user", "content": "Say a lot"}])
    assert answer.choices[0].finish_reason == "length"
    assert answer.choices[0].message.content == "Cut off mid"
