"""The Anthropic Messages adapter against real HTTP: recorded streams and the fake server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stateloop.errors import (
    AuthenticationError,
    ContextWindowExceeded,
    ModelError,
    Overloaded,
    RateLimited,
    Unavailable,
)
from stateloop.events import ReasoningDelta, TextDelta, ToolCallStart
from stateloop.llm.anthropic import AnthropicModel, to_wire_messages, wire_id
from stateloop.llm.base import ModelRequest, ModelResponse, StreamItem, ToolSpec
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
from stateloop.testing import call, calls, reply
from stateloop.testing.fake_openai import (
    FakeItem,
    FakeOpenAI,
    Fault,
    context_overflow,
    dropped_connection,
    overloaded,
    rate_limited,
    recorded,
)

SSE = Path(__file__).parent / "fixtures" / "sse"
MODEL = "claude-haiku-4-5"
WEATHER = ToolSpec("get_weather", "Weather for a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}}})
TIME = ToolSpec("get_time", "Time in a zone.", {"type": "object", "properties": {}})
REQUEST = ModelRequest([system("You are terse."), user("Weather in Paris?")], [WEATHER, TIME])


async def collect(model: AnthropicModel, request: ModelRequest = REQUEST
                  ) -> tuple[list[StreamItem], ModelResponse]:
    items = [item async for item in model.stream(request)]
    assert isinstance(items[-1], ModelResponse)
    return items[:-1], items[-1]


async def replay(fixture: str) -> tuple[list[StreamItem], ModelResponse]:
    with FakeOpenAI([recorded(SSE / fixture)]) as fake:
        return await collect(AnthropicModel(MODEL, base_url=fake.url, api_key="test"))


# --- recorded streams ---------------------------------------------------------------------------

async def test_thinking_text_and_tool_use_stream() -> None:
    events, response = await replay("anthropic_thinking_tools.sse")
    assert "".join(e.delta for e in events if isinstance(e, ReasoningDelta)) == (
        "I should look up the weather in Paris.")
    assert [e.delta for e in events if isinstance(e, TextDelta)] == [
        "Let me check ", "that for you."]
    [start] = [e for e in events if isinstance(e, ToolCallStart)]
    assert (start.id, start.name) == ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather")
    thinking, text = response.message.content
    assert isinstance(thinking, ReasoningPart)
    assert thinking.signature == "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
    assert thinking.model == f"anthropic/{MODEL}"
    assert text == TextPart("Let me check that for you.")
    [tool_call] = response.message.tool_calls
    assert tool_call.arguments == {"city": "Paris", "unit": "celsius"}
    assert response.finish_reason == "tool_calls"
    usage = response.usage  # Anthropic's input_tokens exclude cache reads; ours include them
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens) == (
        472 + 2048, 2048, 0)
    assert usage.output_tokens == 89


async def test_redacted_and_several_thinking_blocks_stay_apart() -> None:
    _, response = await replay("anthropic_redacted_thinking.sse")
    redacted, second, text = response.message.content
    assert isinstance(redacted, ReasoningPart) and redacted.redacted
    assert redacted.text.startswith("EmwKAhgBEgy3va3p")
    assert isinstance(second, ReasoningPart)
    assert (second.text, second.signature) == ("Second thought.", "sig-second")
    assert text == TextPart("Done.")
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.cache_write_tokens) == (1260, 1200)


async def test_error_event_inside_the_stream_is_overloaded() -> None:
    with pytest.raises(Overloaded) as caught:
        await replay("anthropic_overloaded_midstream.sse")
    assert caught.value.message == "Overloaded"
    assert caught.value.transient


# --- what the adapter sends ---------------------------------------------------------------------

async def test_request_caches_system_and_tools_and_maps_tool_choice() -> None:
    with FakeOpenAI([reply("a"), reply("b"), reply("c")]) as fake:
        model = AnthropicModel(MODEL, base_url=fake.base_url, api_key="k")  # ".../v1" is fine
        _, first = await collect(model)
        _, second = await collect(model, ModelRequest(REQUEST.messages, REQUEST.tools,
                                                      tool_choice="required",
                                                      parallel_tool_calls=False, max_tokens=99))
        await collect(model, ModelRequest(REQUEST.messages, REQUEST.tools,
                                          forced_tool="get_time"))
    body, required, forced = (r.body for r in fake.requests)
    assert fake.requests[0].path == "/v1/messages"
    headers = fake.requests[0].headers
    bearer = headers.get("authorization", "").removeprefix("Bearer ")
    assert "k" in (headers.get("x-api-key"), bearer)
    assert body["system"] == [{"type": "text", "text": "You are terse.",
                               "cache_control": {"type": "ephemeral"}}]
    assert [t.get("cache_control") for t in body["tools"]] == [None, {"type": "ephemeral"}]
    assert body["tools"][0]["input_schema"] == WEATHER.parameters
    assert body["max_tokens"] == 64_000  # the registry's limit for the model
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Weather in Paris?"}]}]
    assert "tool_choice" not in body
    assert required["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert required["max_tokens"] == 99
    assert forced["tool_choice"] == {"type": "tool", "name": "get_time"}
    # the fake caches the marked prefix like the service: written once, then read
    assert first.usage.cache_write_tokens > 0 and first.usage.cached_input_tokens == 0
    assert second.usage.cached_input_tokens == first.usage.cache_write_tokens


def test_consecutive_tool_results_merge_into_one_user_turn() -> None:
    paris = ToolCall("toolu_1", "get_weather", {"city": "Paris"})
    oslo = ToolCall("functions.get_weather:1", "get_weather", {"city": "Oslo"})
    messages = [system("sys"), user("Weather?"), assistant("", [paris, oslo]),
                tool_result(paris, "Sunny"), tool_result(oslo, "timeout", is_error=True),
                user("And tomorrow?")]
    system_text, wire = to_wire_messages(messages, f"anthropic/{MODEL}")
    assert system_text == "sys"
    assert [turn["role"] for turn in wire] == ["user", "assistant", "user"]
    oslo_id = wire_id(oslo.id)
    assert oslo_id.replace("_", "").isalnum() and oslo_id != wire_id("functions.get_weather_1")
    assert wire[1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": oslo_id, "name": "get_weather", "input": {"city": "Oslo"}}]
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
        {"type": "tool_result", "tool_use_id": oslo_id, "content": "timeout", "is_error": True},
        {"type": "text", "text": "And tomorrow?"}]


def test_thinking_kept_for_its_model_and_turned_into_text_for_another() -> None:
    mine = ReasoningPart("plan", "sig-1", f"anthropic/{MODEL}")
    hidden = ReasoningPart("opaque", None, f"anthropic/{MODEL}", redacted=True)
    other = ReasoningPart("their plan", None, "openai/o3-mini")
    foreign_hidden = ReasoningPart("x", None, "anthropic/claude-opus-4-1", redacted=True)
    message = Message("assistant", [mine, hidden, other, foreign_hidden, TextPart("Answer")])
    _, wire = to_wire_messages([user("q"), message], f"anthropic/{MODEL}")
    assert wire[1]["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "<reasoning>their plan</reasoning>"},
        {"type": "text", "text": "Answer"}]


def test_images_become_image_blocks() -> None:
    message = Message("user", [TextPart("see"), ImagePart("data:image/png;base64,iVBO"),
                               ImagePart("https://example.com/cat.jpg")])
    _, wire = to_wire_messages([message], f"anthropic/{MODEL}")
    assert wire[0]["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBO"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}]


async def test_a_tool_loop_transcript_round_trips_through_the_server() -> None:
    script: list[FakeItem] = [
        calls(call("get_weather", city="Paris"), call("get_time"), text="Checking."),
              reply("Sunny, 3pm.", reasoning="Both answered."), reply("You're welcome.")]
    with FakeOpenAI(script) as fake:
        model = AnthropicModel(MODEL, base_url=fake.url, api_key="k")
        _, first = await collect(model)
        transcript = [*REQUEST.messages, first.message,
                      *(tool_result(c, "ok") for c in first.message.tool_calls)]
        _, second = await collect(model, ModelRequest(transcript, REQUEST.tools))
        transcript += [second.message, user("Thanks")]
        _, third = await collect(model, ModelRequest(transcript, REQUEST.tools))
    assert second.message.text == "Sunny, 3pm."
    assert second.message.reasoning == "Both answered."
    assert third.message.text == "You're welcome."
    sent = fake.requests[2].body["messages"]
    assert [turn["role"] for turn in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert len(sent[2]["content"]) == 2  # both results in one turn
    # the signed thinking went back as it came; the fake verified its signature
    assert sent[3]["content"][0]["type"] == "thinking"


# --- failures -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("fault", "kind", "text"), [
    (overloaded(), Overloaded, "Overloaded"),
    (rate_limited(1.5), RateLimited, "rate limit"),
    (context_overflow(), ContextWindowExceeded, "prompt is too long: 208310 tokens"),
])
async def test_http_failures_become_typed_errors(fault: Fault, kind: type[ModelError],
                                                 text: str) -> None:
    with FakeOpenAI([reply("never")], faults=[fault]) as fake, pytest.raises(kind) as caught:
        await collect(AnthropicModel(MODEL, base_url=fake.url, api_key="k"))
    assert text in caught.value.message
    assert caught.value.provider == "anthropic"
    if kind is RateLimited:
        assert caught.value.retry_after == 1.5


async def test_unpaired_tool_use_is_rejected_with_anthropics_words() -> None:
    lonely = ToolCall("toolu_9", "get_weather", {"city": "Rome"})
    transcript = [system("s"), user("q"), assistant("", [lonely]), user("hello?")]
    with FakeOpenAI([reply("never")]) as fake, pytest.raises(ModelError) as caught:
        await collect(AnthropicModel(MODEL, base_url=fake.url, api_key="k"),
                      ModelRequest(transcript))
    assert "`tool_use` ids were found without `tool_result` blocks" in caught.value.message
    assert not caught.value.transient


async def test_dropped_stream_is_unavailable() -> None:
    fake = FakeOpenAI([reply("Hello there, friend")], faults=[dropped_connection(4)])
    with fake, pytest.raises(Unavailable, match="broke mid-stream"):
        await collect(AnthropicModel(MODEL, base_url=fake.url, api_key="k"))


async def test_wrong_and_missing_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        await collect(AnthropicModel(MODEL))
    with FakeOpenAI([reply("hi")], api_key="right") as fake:
        with pytest.raises(AuthenticationError, match="invalid x-api-key"):
            await collect(AnthropicModel(MODEL, base_url=fake.url, api_key="wrong"))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "right")
        _, response = await collect(AnthropicModel(MODEL, base_url=fake.url))
    assert response.message.text == "hi"


def test_body_from_kept_turns_equals_a_fresh_conversion() -> None:
    """Turns kept between calls give the body a fresh conversion gives: through appends that
    join the last turn, a compaction, and a message replaced in the middle."""
    paris = ToolCall("toolu_1", "get_weather", {"city": "Paris"})
    oslo = ToolCall("toolu_2", "get_weather", {"city": "Oslo"})
    history = [user("q0"), assistant("Checking.", [paris, oslo]), tool_result(paris, "Sunny"),
               tool_result(oslo, "Snow"), user("and?"), assistant("Sunny and snow."),
               user("thanks"), system("a note"), assistant("Welcome.")]
    model = AnthropicModel(MODEL, base_url="http://127.0.0.1:9", api_key="k")
    transcripts = [[system("s"), *history[:n]] for n in range(1, len(history) + 1)]
    transcripts += [
        [system("s2"), user("summary"), *history[4:]],  # compacted
        [system("s2"), user("summary"), history[4], user("edited"), *history[6:]],
        [system("s"), *history],
    ]
    for transcript in transcripts:
        body = json.loads(model.body(ModelRequest(transcript)))
        system_text, turns = to_wire_messages(transcript, f"anthropic/{MODEL}")
        assert body["messages"] == turns
        assert body["system"][0]["text"] == system_text
