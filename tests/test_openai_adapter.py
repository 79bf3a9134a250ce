"""The Chat Completions adapter against real HTTP: recorded provider streams and the fake server."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from stateloop.errors import (
    AuthenticationError,
    ContextWindowExceeded,
    InvalidRequest,
    InvalidResponse,
    ModelError,
    Overloaded,
    RateLimited,
    Unavailable,
)
from stateloop.events import ReasoningDelta, TextDelta, ToolCallDelta, ToolCallStart
from stateloop.llm.base import ModelRequest, ModelResponse, StreamItem, ToolSpec
from stateloop.llm.openai import OpenAIModel, to_wire_messages, wire_id
from stateloop.messages import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCall,
    assistant,
    system,
    tool_result,
    user,
)
from stateloop.testing import call, calls, error, reply
from stateloop.testing.fake_openai import (
    FakeItem,
    FakeOpenAI,
    Fault,
    context_overflow,
    dropped_connection,
    http_error,
    malformed_chunk,
    overloaded,
    rate_limited,
    recorded,
    server_error,
)

SSE = Path(__file__).parent / "fixtures" / "sse"
WEATHER = ToolSpec("get_weather", "Weather for a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}}})
REQUEST = ModelRequest([system("You are terse."), user("Weather in Paris?")], [WEATHER])


async def collect(model: OpenAIModel, request: ModelRequest = REQUEST
                  ) -> tuple[list[StreamItem], ModelResponse]:
    items = [item async for item in model.stream(request)]
    assert isinstance(items[-1], ModelResponse)
    assert not any(isinstance(i, ModelResponse) for i in items[:-1])
    return items[:-1], items[-1]


async def replay(fixture: str, name: str = "gpt-4o") -> tuple[list[StreamItem], ModelResponse]:
    with FakeOpenAI([recorded(SSE / fixture)]) as fake:
        return await collect(OpenAIModel(name, base_url=fake.base_url, api_key="test"))


# --- recorded streams ---------------------------------------------------------------------------

async def test_openai_text_stream_with_cached_and_reasoning_usage() -> None:
    events, response = await replay("openai_text.sse")
    assert [e.delta for e in events if isinstance(e, TextDelta)] == [
        "Hello", "!", " How can I assist you today?"]
    assert response.message.text == "Hello! How can I assist you today?"
    assert response.finish_reason == "stop"
    usage = response.usage
    # cached tokens are part of the input and reasoning part of the output, never added on top
    assert (usage.input_tokens, usage.cached_input_tokens) == (2006, 1920)
    assert (usage.output_tokens, usage.reasoning_tokens) == (300, 128)
    assert usage.total_tokens == 2306


async def test_openai_parallel_tool_calls_assembled_from_fragments() -> None:
    events, response = await replay("openai_parallel_tools.sse", "gpt-4o-mini")
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (0, "call_Tf1kA0EBWcVQ1xLsZQ0gY3hK", "get_weather"),
        (1, "call_9kQf5sbyT1XUAhZk2dD4LqWm", "get_time")]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert "".join(d.delta for d in deltas if d.index == 0) == '{"location": "Paris, France"}'
    first, second = response.message.tool_calls
    assert first.arguments == {"location": "Paris, France"}
    assert second.arguments == {"tz": "Europe/Paris"}
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (82, 51)


async def test_vllm_reasoning_content_and_stop_after_tool_call() -> None:
    events, response = await replay("vllm_reasoning_tools.sse", "Qwen/Qwen3-8B")
    assert "".join(e.delta for e in events if isinstance(e, ReasoningDelta)) == (
        "The user wants the weather in Paris.")
    reasoning = response.message.content[0]
    assert isinstance(reasoning, ReasoningPart)
    assert reasoning.model == "openai/Qwen/Qwen3-8B"
    [tool_call] = response.message.tool_calls
    assert tool_call.id == "chatcmpl-tool-2f6c1a8e0b4d4f0e9a7b"
    assert tool_call.arguments == {"city": "Paris"}
    assert response.finish_reason == "tool_calls"  # the server said "stop"
    assert (response.usage.input_tokens, response.usage.cached_input_tokens) == (212, 0)


async def test_ollama_reasoning_field_and_whole_calls_in_one_chunk() -> None:
    events, response = await replay("ollama_tools.sse", "qwen3:8b")
    assert response.message.reasoning == "Need the weather for two cities."
    assert [c.arguments["city"] for c in response.message.tool_calls] == ["Paris", "Tokyo"]
    assert [c.id for c in response.message.tool_calls] == ["call_5x1mqh2c", "call_ud2kv3fa"]
    assert len([e for e in events if isinstance(e, ToolCallStart)]) == 2
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (143, 61)


async def test_llamacpp_null_content_and_usage_on_the_finish_chunk() -> None:
    _, response = await replay("llamacpp_text.sse", "qwen2.5-7b-instruct")
    assert response.message.text == "Hi there"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (17, 2)


async def test_error_inside_the_stream_keeps_the_provider_text() -> None:
    with pytest.raises(Unavailable) as caught:
        await replay("openai_error_midstream.sse")
    assert caught.value.message == (
        "The server had an error while processing your request. Sorry about that!")


async def test_tool_calls_without_index_are_told_apart_by_id() -> None:
    stream = b"".join(
        b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":' + delta + b',"finish_reason":' + finish + b"}]}\n\n"
        for delta, finish in [
            (b'{"tool_calls":[{"id":"a1","type":"function","function":{"name":"f",'
             b'"arguments":"{\\"n\\": "}}]}', b"null"),
            (b'{"tool_calls":[{"function":{"arguments":"1}"}}]}', b"null"),
            (b'{"tool_calls":[{"id":"b2","type":"function","function":{"name":"g",'
             b'"arguments":{"n": 2}}}]}', b"null"),
            (b"{}", b'"tool_calls"')]) + b"data: [DONE]\n\n"
    with FakeOpenAI([recorded(stream)]) as fake:
        _, response = await collect(OpenAIModel("m", base_url=fake.base_url))
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == [
        ("a1", "f", {"n": 1}), ("b2", "g", {"n": 2})]


# --- what the adapter sends ---------------------------------------------------------------------

async def test_request_body_streams_with_usage_and_maps_tool_choice() -> None:
    script: list[FakeItem] = [call("get_weather", city="Paris"), reply("a"), reply("b"),
                              reply("c")]
    with FakeOpenAI(script) as fake:
        model = OpenAIModel("llama3.1", base_url=fake.base_url)
        await collect(model)
        await collect(model, ModelRequest(REQUEST.messages, [WEATHER], tool_choice="required",
                                          parallel_tool_calls=False, max_tokens=64))
        await collect(model, ModelRequest(REQUEST.messages, [WEATHER],
                                          forced_tool="get_weather"))
        await collect(model, ModelRequest(REQUEST.messages))
    first, required, forced, no_tools = (r.body for r in fake.requests)
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert first["tools"] == [{"type": "function", "function": WEATHER.to_dict()}]
    assert "tool_choice" not in first and "parallel_tool_calls" not in first
    assert first["messages"][0] == {"role": "system", "content": "You are terse."}
    assert required["tool_choice"] == "required"
    assert required["parallel_tool_calls"] is False
    assert required["max_tokens"] == 64 and "max_completion_tokens" not in required
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert "tools" not in no_tools and "tool_choice" not in no_tools


async def test_server_rejecting_developer_role_gets_system() -> None:
    with FakeOpenAI([reply("ok"), reply("again")], reject_roles=["developer"]) as fake:
        model = OpenAIModel("o3-mini", base_url=fake.base_url, system_role="developer")
        _, response = await collect(model)
        await collect(model)
    roles = [r.body["messages"][0]["role"] for r in fake.requests]
    assert roles == ["developer", "system", "system"]  # learned once, kept
    assert response.message.text == "ok"


async def test_server_rejecting_a_max_tokens_field_gets_the_other() -> None:
    request = ModelRequest(REQUEST.messages, max_tokens=100)
    with FakeOpenAI([reply("ok")], reject_fields=["max_completion_tokens"]) as fake:
        model = OpenAIModel("gpt-5-mini", base_url=fake.base_url,
                            max_tokens_field="max_completion_tokens")
        await collect(model, request)
    sent = [r.body for r in fake.requests]
    assert sent[0]["max_completion_tokens"] == 100
    assert sent[1]["max_tokens"] == 100 and "max_completion_tokens" not in sent[1]


def test_transcript_to_wire_messages() -> None:
    long_id = "call_" + "x" * 60
    got = ToolCall(long_id, "get_weather", {"city": "Paris"})
    bad = ToolCall("call_2", "get_weather", {}, raw_arguments='{"city": ', parse_error="bad")
    messages = [
        system("sys"),
        Message("user", [TextPart("What is this?"), ImagePart("data:image/png;base64,iVBO")]),
        Message("assistant", [ReasoningPart("hidden", "sig", "anthropic/claude-haiku-4-5"),
                              TextPart("Checking.")], [got, bad]),
        tool_result(got, "Sunny"),
        tool_result(bad, "invalid arguments", is_error=True),
        assistant("It is sunny."),
    ]
    wire = to_wire_messages(messages, "developer")
    assert wire[0] == {"role": "developer", "content": "sys"}
    assert wire[1]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]
    assert wire[2]["content"] == "Checking."  # reasoning has no place in Chat Completions
    short = wire_id(long_id)
    assert len(short) <= 40 and short == wire[2]["tool_calls"][0]["id"] == wire[3]["tool_call_id"]
    assert wire[2]["tool_calls"][1]["function"]["arguments"] == '{"city": '  # kept as written
    assert wire[4] == {"role": "tool", "tool_call_id": "call_2", "content": "invalid arguments"}
    assert wire[5] == {"role": "assistant", "content": "It is sunny."}


async def test_a_transcript_with_long_ids_is_accepted_by_the_server() -> None:
    got = ToolCall("toolu_" + "y" * 50, "get_weather", {"city": "Paris"})
    transcript = [system("s"), user("hi"), assistant("", [got]), tool_result(got, "Sunny")]
    with FakeOpenAI([reply("Sunny it is.")]) as fake:
        _, response = await collect(OpenAIModel("gpt-4o", base_url=fake.base_url),
                                    ModelRequest(transcript))
    assert response.message.text == "Sunny it is."


# --- failures -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("fault", "kind", "text"), [
    (rate_limited(0.25), RateLimited, "Rate limit reached for requests"),
    (server_error(), Unavailable, "The server had an error"),
    (overloaded(), Overloaded, "overloaded"),
    (http_error(503, "The engine is currently overloaded"), Overloaded, "engine"),
    (context_overflow(), ContextWindowExceeded, "maximum context length is 128000"),
    (http_error(400, "Invalid value for 'temperature'"), InvalidRequest, "temperature"),
])
async def test_http_failures_become_typed_errors(fault: Fault, kind: type[ModelError],
                                                 text: str) -> None:
    with FakeOpenAI([reply("never")], faults=[fault]) as fake, pytest.raises(kind) as caught:
        await collect(OpenAIModel("gpt-4o", base_url=fake.base_url))
    assert text in caught.value.message
    assert caught.value.provider == "openai"
    assert caught.value.transient is (kind in (RateLimited, Overloaded, Unavailable))
    if kind is RateLimited:
        assert caught.value.retry_after == 0.25
        assert caught.value.status_code == 429


async def test_scripted_error_kinds_reach_the_caller_unaltered() -> None:
    message = "prompt has 9000 tokens but this model's maximum context length is 8192"
    fake = FakeOpenAI([error("context_overflow", message)])
    with fake, pytest.raises(ContextWindowExceeded) as caught:
        await collect(OpenAIModel("llama3.1", base_url=fake.base_url))
    assert caught.value.message == message


async def test_wrong_api_key_is_an_authentication_error() -> None:
    with FakeOpenAI([reply("hi")], api_key="right") as fake:
        with pytest.raises(AuthenticationError, match="Incorrect API key provided"):
            await collect(OpenAIModel("gpt-4o", base_url=fake.base_url, api_key="wrong"))
        _, response = await collect(OpenAIModel("gpt-4o", base_url=fake.base_url,
                                                api_key="right"))
    assert response.message.text == "hi"


async def test_dropped_connection_and_malformed_chunk() -> None:
    faults = [dropped_connection(after_chunks=3), malformed_chunk(after_chunks=2)]
    with FakeOpenAI([reply("Hello there, how are you?")], faults=faults) as fake:
        model = OpenAIModel("gpt-4o", base_url=fake.base_url)
        with pytest.raises(Unavailable, match="broke mid-stream"):
            await collect(model)
        with pytest.raises(InvalidResponse, match="malformed chunk"):
            await collect(model)
        _, response = await collect(model)  # the cut-short reply is served again
    assert response.message.text == "Hello there, how are you?"


async def test_unreachable_base_url_names_the_url() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(Unavailable) as caught:
        await collect(OpenAIModel("gpt-4o", base_url=url))
    assert url in caught.value.message


async def test_missing_api_key_is_reported_on_first_call(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIModel("gpt-4o-mini")  # constructing is fine
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        await collect(model)


async def test_environment_supplies_base_url_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI([reply("from env")], api_key="env-key") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "env-key")
        _, response = await collect(OpenAIModel("gpt-4o-mini"))
    assert response.message.text == "from env"
    assert fake.requests[0].headers["authorization"] == "Bearer env-key"


async def test_parallel_calls_from_the_script() -> None:
    script = [calls(call("get_weather", city="Paris"), call("get_weather", city="Oslo"))]
    with FakeOpenAI(script, chunk_size=3) as fake:
        events, response = await collect(OpenAIModel("gpt-4o", base_url=fake.base_url))
    assert [c.arguments for c in response.message.tool_calls] == [{"city": "Paris"},
                                                                  {"city": "Oslo"}]
    assert sum(isinstance(e, ToolCallDelta) for e in events) > 4  # arguments really were split


def test_body_from_kept_pieces_equals_a_fresh_conversion() -> None:
    """Pieces kept between calls give the body a fresh conversion gives, through appends, a
    replaced system prompt, a compaction and an edit that replaces a message."""
    found = ToolCall("call_1", "get_weather", {"city": "Paris"})
    history = [user("q0"), assistant("", [found]), tool_result(found, "Sunny"),
               assistant("It is sunny."), user("thanks"), assistant("You're welcome.")]
    model = OpenAIModel("gpt-4o", base_url="http://127.0.0.1:9/v1")
    transcripts = [
        [system("s1"), *history[:2]],
        [system("s1"), *history[:4]],
        [system("s2"), *history],  # new system prompt, two appended
        [system("s2"), user("summary"), *history[3:]],  # compacted
        [system("s2"), user("summary"), history[3], user("edited"), history[5]],
        [system("s2"), *history],
    ]
    for transcript in transcripts:
        body = json.loads(model.body(ModelRequest(transcript)))
        assert body["messages"] == to_wire_messages(transcript)
