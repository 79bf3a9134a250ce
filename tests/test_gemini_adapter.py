"""The Gemini adapter against real HTTP: a recorded Google stream, the fake server's Gemini
routes, and agent runs with tools, retries and compaction."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from stateloop import Agent, tool
from stateloop.errors import (
    AuthenticationError,
    ConfigError,
    ContextWindowExceeded,
    InvalidRequest,
    InvalidResponse,
    ModelError,
    Overloaded,
    RateLimited,
    Unavailable,
)
from stateloop.events import ReasoningDelta, TextDelta, ToolCallStart
from stateloop.llm.base import ModelRequest, ModelResponse, ModelSettings, StreamItem, ToolSpec
from stateloop.llm.gemini_schema import gemini_schema
from stateloop.llm.google import GeminiModel, to_wire_contents
from stateloop.llm.retry import RetryPolicy
from stateloop.messages import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCall,
    Usage,
    assistant,
    system,
    tool_result,
    user,
)
from stateloop.testing import assert_transcript_valid, call, calls, reply
from stateloop.testing.fake_openai import (
    FakeOpenAI,
    Fault,
    context_overflow,
    dropped_connection,
    malformed_chunk,
    overloaded,
    rate_limited,
    recorded,
    server_error,
)

MODEL = "gemini-2.5-flash"
WEATHER = ToolSpec("get_weather", "Weather for a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"], "additionalProperties": False})
TIME = ToolSpec("get_time", "The time now.", {"type": "object", "properties": {}})
REQUEST = ModelRequest([system("You are terse."), user("Weather in Paris?")], [WEATHER, TIME])
FAST = RetryPolicy(retries=3, base=0.001, cap=0.002)


async def collect(model: GeminiModel, request: ModelRequest = REQUEST
                  ) -> tuple[list[StreamItem], ModelResponse]:
    items = [item async for item in model.stream(request)]
    assert isinstance(items[-1], ModelResponse)
    return items[:-1], items[-1]


def gemini(fake: FakeOpenAI, name: str = MODEL, **options: Any) -> GeminiModel:
    return GeminiModel(name, base_url=fake.url, api_key="k", **options)


# --- a stream as Google sends it -----------------------------------------------------------------

GOOGLE_STREAM = b"".join(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n" for chunk in [
    {"candidates": [{"content": {"parts": [{"text": "**Checking the sky**", "thought": True}],
                                 "role": "model"}, "index": 0}],
     "usageMetadata": {"promptTokenCount": 120, "totalTokenCount": 120},
     "modelVersion": "gemini-2.5-flash", "responseId": "r1"},
    {"candidates": [{"content": {"parts": [{"text": "Let me look."}], "role": "model"},
                     "index": 0}], "modelVersion": "gemini-2.5-flash", "responseId": "r1"},
    {"candidates": [{"content": {"parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
         "thoughtSignature": "CiQB0e2Kb1"},
        {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
        {"functionCall": {"name": "get_time", "args": {}}}], "role": "model"},
        "finishReason": "STOP", "index": 0}],
     "usageMetadata": {"promptTokenCount": 2120, "candidatesTokenCount": 31,
                       "thoughtsTokenCount": 57, "cachedContentTokenCount": 2048,
                       "toolUsePromptTokenCount": 5, "totalTokenCount": 2213},
     "modelVersion": "gemini-2.5-flash", "responseId": "r1"}])


async def test_a_google_stream_gives_thoughts_text_whole_calls_and_usage() -> None:
    with FakeOpenAI([recorded(GOOGLE_STREAM)]) as fake:
        events, response = await collect(gemini(fake))
    assert [e.delta for e in events if isinstance(e, ReasoningDelta)] == ["**Checking the sky**"]
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["Let me look."]
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.name) for s in starts] == [(0, "get_weather"), (1, "get_weather"),
                                                   (2, "get_time")]
    assert len({s.id for s in starts}) == 3  # each call has its own id
    message = response.message
    assert [c.id for c in message.tool_calls] == [s.id for s in starts]
    assert [c.arguments for c in message.tool_calls] == [{"city": "Paris"}, {"city": "Oslo"}, {}]
    reasoning, text = message.content
    assert isinstance(reasoning, ReasoningPart)
    assert (reasoning.text, reasoning.signature, reasoning.model) == (
        "**Checking the sky**", "CiQB0e2Kb1", f"google_ai/{MODEL}")
    assert text == TextPart("Let me look.")
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=2125, output_tokens=88,
                                   cached_input_tokens=2048, reasoning_tokens=57)


# --- what the adapter sends ----------------------------------------------------------------------

async def test_request_maps_system_tools_tool_choice_and_settings() -> None:
    with FakeOpenAI([reply("a")] * 5, api_key="k") as fake:
        model = gemini(fake, temperature=0.2)
        await collect(model)
        await collect(model, ModelRequest(REQUEST.messages, REQUEST.tools, "required",
                                          max_tokens=99, settings=ModelSettings(
                                              temperature=0.9, thinking_budget=0)))
        await collect(model, ModelRequest(REQUEST.messages, REQUEST.tools,
                                          forced_tool="get_time",
                                          settings=ModelSettings(reasoning_effort="low")))
        await collect(gemini(fake, "gemini-3-pro-preview"), ModelRequest(
            REQUEST.messages, REQUEST.tools, "none",
            settings=ModelSettings(reasoning_effort="high")))
        await collect(gemini(fake, "gemini-2.0-flash"), ModelRequest(
            REQUEST.messages, settings=ModelSettings(response_format={
                "type": "json_schema", "json_schema": {"name": "r", "schema": {
                    "type": "object", "properties": {"ok": {"type": "boolean"}},
                    "additionalProperties": False}}})))
    first, required, forced, level, json_mode = (r.body for r in fake.requests)
    request = fake.requests[0]
    assert request.path == f"/v1beta/models/{MODEL}:streamGenerateContent"
    assert request.headers["x-goog-api-key"] == "k"
    assert first["systemInstruction"] == {"parts": [{"text": "You are terse."}]}
    assert first["contents"] == [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]
    [weather, clock] = first["tools"][0]["functionDeclarations"]
    assert weather["parameters"] == {"type": "object", "properties": {"city": {"type": "string"}},
                                     "required": ["city"]}
    assert "parameters" not in clock  # Gemini refuses an object without properties
    assert "toolConfig" not in first
    assert first["generationConfig"] == {"maxOutputTokens": 65_536, "temperature": 0.2,
                                         "thinkingConfig": {"includeThoughts": True}}
    assert required["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert required["generationConfig"] == {"maxOutputTokens": 99, "temperature": 0.9,
                                            "thinkingConfig": {"thinkingBudget": 0}}
    assert forced["toolConfig"] == {"functionCallingConfig": {
        "mode": "ANY", "allowedFunctionNames": ["get_time"]}}
    assert forced["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 1024,
                                                            "includeThoughts": True}
    assert level["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
    assert level["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "high",
                                                           "includeThoughts": True}
    assert json_mode["generationConfig"] == {
        "maxOutputTokens": 8_192, "responseMimeType": "application/json",
        "responseSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}


class Address(BaseModel):
    street: str
    zip_code: str | None = None


class Stay(BaseModel):
    city: str
    address: Address
    previous: list[Address] = []
    nights: int | None = None


@tool
def book(stay: Stay, note: str | None = None) -> str:
    """Book a stay."""
    return f"booked {stay.city} at {stay.address.street}, {len(stay.previous)} before"


def test_a_nested_optional_schema_becomes_gemini_s_subset() -> None:
    schema = book.parameters
    assert "$defs" in json.dumps(schema) or "$ref" in json.dumps(schema)
    converted = gemini_schema(schema)
    text = json.dumps(converted)
    for refused in ("$ref", "$defs", "additionalProperties", "anyOf", '"null"', "default"):
        assert refused not in text
    stay = converted["properties"]["stay"]
    assert stay["properties"]["address"]["properties"]["zip_code"] == {"type": "string",
                                                                       "nullable": True}
    assert stay["properties"]["previous"]["items"]["required"] == ["street"]
    assert stay["properties"]["nights"] == {"type": "integer", "nullable": True}
    assert converted["properties"]["note"] == {"type": "string", "nullable": True}
    assert converted["required"] == ["stay"]


def test_a_recursive_reference_is_cut_and_enums_become_strings() -> None:
    schema = {"$defs": {"Node": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
        "type": "object", "properties": {"root": {"$ref": "#/$defs/Node"},
                                         "level": {"enum": [1, 2]},
                                         "kind": {"const": "x"},
                                         "when": {"type": ["string", "null"],
                                                  "format": "date-time"}}}
    converted = gemini_schema(schema)
    root = converted["properties"]["root"]
    assert root["properties"]["kids"]["items"] == {"type": "object"}
    assert converted["properties"]["level"] == {"enum": ["1", "2"], "type": "string"}
    assert converted["properties"]["kind"] == {"enum": ["x"], "type": "string"}
    assert converted["properties"]["when"] == {"format": "date-time", "type": "string",
                                               "nullable": True}


async def test_the_fake_refuses_a_schema_gemini_would_refuse() -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [{"functionDeclarations": [{"name": "f", "parameters": WEATHER.parameters}]}]}
    with FakeOpenAI([reply("never")]) as fake:
        async with httpx.AsyncClient() as client:
            answer = await client.post(f"{fake.url}/v1beta/models/{MODEL}:generateContent",
                                       json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert 'Unknown name "additionalProperties"' in answer.json()["error"]["message"]


# --- agent runs ----------------------------------------------------------------------------------

@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_an_agent_runs_one_and_several_calls_a_turn_through_gemini() -> None:
    script = [call("add", a=1, b=2), calls(call("add", a=3, b=4), call("book", stay={
        "city": "Oslo", "address": {"street": "Main 1"}})), reply("3, 7, booked.")]
    with FakeOpenAI(script, api_key="k") as fake:
        agent = Agent(model=gemini(fake), tools=[add, book], system="Be brief.")
        result = await agent.run("Add and book.")
    assert (result.output, result.stop_reason, result.steps) == (
        "3, 7, booked.", "end_turn", 3)
    assert [m.text for m in result.messages if m.role == "tool"] == [
        "3", "7", "booked Oslo at Main 1, 0 before"]
    assert_transcript_valid(result.messages)
    last = fake.requests[-1].body["contents"]
    assert [turn["role"] for turn in last] == ["user", "model", "user", "model", "user"]
    assert [list(p) for p in last[3]["parts"]] == [["functionCall", "thoughtSignature"],
                                                   ["functionCall"]]
    assert [p["functionResponse"] for p in last[4]["parts"]] == [
        {"name": "add", "response": {"output": "7"}},
        {"name": "book", "response": {"output": "booked Oslo at Main 1, 0 before"}}]
    declared = json.dumps(fake.requests[0].body["tools"])
    assert "$ref" not in declared and "additionalProperties" not in declared


async def test_an_agent_retries_a_429_after_google_s_delay_and_a_503() -> None:
    with FakeOpenAI([reply("at last")], faults=[rate_limited(0.3), overloaded()]) as fake:
        agent = Agent(model=gemini(fake), retry=RetryPolicy(retries=3, base=0.0, cap=0.0))
        started = time.monotonic()
        result = await agent.run("hi")
        elapsed = time.monotonic() - started
    assert result.output == "at last" and len(fake.requests) == 3
    assert elapsed >= 0.3  # the RetryInfo delay, not the policy's zero backoff


async def test_a_malformed_function_call_is_asked_again() -> None:
    script = [reply("", finish_reason="MALFORMED_FUNCTION_CALL"), reply("fine")]
    with FakeOpenAI(script) as fake:
        result = await Agent(model=gemini(fake), retry=FAST).run("hi")
    assert result.output == "fine" and len(fake.requests) == 2


async def test_a_context_overflow_compacts_and_the_run_goes_on() -> None:
    script = [reply("a " * 50), reply("b " * 50), reply("the summary"), reply("fits now")]
    with FakeOpenAI(script, faults=[None, None, context_overflow()]) as fake:
        agent = Agent(model=gemini(fake, context_window=100_000))
        for text in ("one", "two"):
            await agent.run(text)
        result = await agent.run("three")
    assert result.stop_reason == "end_turn" and result.output == "fits now"
    assert fake.requests[2].path.endswith(":streamGenerateContent")
    assert_transcript_valid(agent.messages)


# --- failures ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("fault", "kind", "text"), [
    (rate_limited(1.5), RateLimited, "Resource has been exhausted"),
    (overloaded(), Overloaded, "The model is overloaded"),
    (server_error(), Unavailable, "An internal error has occurred"),
    (context_overflow(), ContextWindowExceeded, "exceeds the maximum number of tokens allowed"),
    (malformed_chunk(1), InvalidResponse, "malformed event"),
    (dropped_connection(1), Unavailable, "broke mid-stream"),
])
async def test_failures_become_typed_errors(fault: Fault, kind: type[ModelError],
                                            text: str) -> None:
    with FakeOpenAI([reply("Hello there, friend", reasoning="hmm")], faults=[fault],
                    chunk_size=4) as fake, pytest.raises(kind) as caught:
        await collect(gemini(fake))
    assert text in caught.value.message
    assert caught.value.provider == "google_ai"
    if kind is RateLimited:
        assert caught.value.retry_after == 1.5  # from RetryInfo: Google sends no Retry-After


async def test_wrong_and_missing_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_BASE_URL", raising=False)
    with pytest.raises(AuthenticationError, match="GEMINI_API_KEY"):
        await collect(GeminiModel(MODEL))
    with FakeOpenAI([reply("hi")], api_key="right") as fake:
        with pytest.raises(AuthenticationError, match="API key not valid") as wrong:
            await collect(GeminiModel(MODEL, base_url=fake.url, api_key="wrong"))
        with pytest.raises(AuthenticationError, match="unregistered callers") as missing:
            await collect(GeminiModel(MODEL, base_url=fake.url))
        monkeypatch.setenv("GEMINI_API_KEY", "right")
        monkeypatch.setenv("GEMINI_BASE_URL", fake.url + "/")
        _, response = await collect(GeminiModel(MODEL))
    assert (wrong.value.status_code, missing.value.status_code) == (400, 403)
    assert response.message.text == "hi"


async def test_the_fake_checks_turns_pairing_and_signatures_as_google_does() -> None:
    weather = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
    answer = {"functionResponse": {"name": "get_weather", "response": {"output": "Sunny"}}}
    hi = {"role": "user", "parts": [{"text": "hi"}]}
    cases = {
        "alternate between user and model": [hi, hi],
        "number of function response parts": [hi, {"role": "model", "parts": [weather, weather]},
                                              {"role": "user", "parts": [answer]}],
        "function response turn comes immediately": [hi, {"role": "model", "parts": [
            {"text": "ok"}]}, {"role": "user", "parts": [answer]}],
        "Corrupted thought signature": [hi, {"role": "model", "parts": [
            {**weather, "thoughtSignature": "forged"}]}, {"role": "user", "parts": [answer]}],
    }
    with FakeOpenAI([reply("never")] * 5, api_key="k") as fake:
        async with httpx.AsyncClient(headers={"x-goog-api-key": "k"}) as client:
            for expected, contents in cases.items():
                answer_ = await client.post(
                    f"{fake.url}/v1beta/models/{MODEL}:generateContent",
                    json={"contents": contents})
                assert answer_.status_code == 400, expected
                assert expected in answer_.json()["error"]["message"]
            unsigned = await client.post(
                f"{fake.url}/v1beta/models/gemini-3-pro-preview:generateContent",
                json={"contents": [hi, {"role": "model", "parts": [weather]},
                                   {"role": "user", "parts": [answer]}]})
            listing = await client.get(f"{fake.url}/v1beta/models")
    assert "missing a thought_signature" in unsigned.json()["error"]["message"]
    assert "models/gemini-2.5-flash" in [m["name"] for m in listing.json()["models"]]


# --- the transcript as contents ------------------------------------------------------------------

def test_signatures_go_back_only_to_their_model_and_images_become_parts() -> None:
    paris = ToolCall("c1", "get_weather", {"city": "Paris"})
    mine = Message("assistant", [ReasoningPart("plan", "sig-1", f"google_ai/{MODEL}")], [paris])
    other = Message("assistant", [ReasoningPart("theirs", "sig-2", "anthropic/claude"),
                                  TextPart("Done.")])
    picture = Message("user", [TextPart("see"), ImagePart("data:image/png;base64,iVBO"),
                               ImagePart("https://example.com/cat.jpg")])
    messages = [system("s"), picture, mine, tool_result(paris, "boom", is_error=True),
                system("a note"), other, user("ok")]
    system_text, contents = to_wire_contents(messages, f"google_ai/{MODEL}")
    assert system_text == "s"
    assert contents == [
        {"role": "user", "parts": [
            {"text": "see"}, {"inlineData": {"mimeType": "image/png", "data": "iVBO"}},
            {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather",
                                                      "args": {"city": "Paris"}},
                                     "thoughtSignature": "sig-1"}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"error": "boom"}}},
            {"text": "a note"}]},
        {"role": "model", "parts": [{"text": "Done."}]},
        {"role": "user", "parts": [{"text": "ok"}]}]


def test_body_from_kept_parts_equals_a_fresh_conversion() -> None:
    paris = ToolCall("c1", "get_weather", {"city": "Paris"})
    oslo = ToolCall("c2", "get_weather", {"city": "Oslo"})
    history = [user("q0"), assistant("Checking.", [paris, oslo]), tool_result(paris, "Sunny"),
               tool_result(oslo, "Snow"), user("and?"), assistant("Sunny and snow."),
               user("thanks"), system("a note"), assistant("Welcome.")]
    model = GeminiModel(MODEL, base_url="http://127.0.0.1:9", api_key="k")
    transcripts = [[system("s"), *history[:n]] for n in range(1, len(history) + 1)]
    transcripts += [[system("s2"), user("summary"), *history[4:]],
                    [system("s2"), user("summary"), history[4], user("edited"), *history[6:]]]
    for transcript in transcripts:
        body = json.loads(model.body(ModelRequest(transcript)))
        system_text, contents = to_wire_contents(transcript, model.name)
        assert body["contents"] == contents
        assert body["systemInstruction"]["parts"][0]["text"] == system_text


# --- what a caller may not make it do ------------------------------------------------------------

def test_a_model_name_cannot_leave_the_models_path() -> None:
    for name in ("../files", "gemini-2.5-flash:countTokens", "a?key=x", "x/y", ""):
        with pytest.raises(ConfigError, match="not a Gemini model name"):
            GeminiModel(name, api_key="k")
    assert GeminiModel("models/gemini-2.0-flash", api_key="k").name == "google_ai/gemini-2.0-flash"


async def test_a_schema_that_multiplies_when_inlined_is_refused_not_expanded() -> None:
    defs = {f"D{i}": {"type": "object", "properties": {
        "left": {"$ref": f"#/$defs/D{i + 1}"}, "right": {"$ref": f"#/$defs/D{i + 1}"}}}
        for i in range(40)}
    defs["D40"] = {"type": "string"}
    bomb = ToolSpec("bomb", "2**40 leaves.", {"$defs": defs, "type": "object",
                                              "properties": {"root": {"$ref": "#/$defs/D0"}}})
    started = time.monotonic()
    with FakeOpenAI([reply("never")]) as fake, pytest.raises(InvalidRequest) as refused:
        await collect(gemini(fake), ModelRequest([user("hi")], [bomb]))
    assert "'bomb'" in refused.value.message and "5000" in refused.value.message
    assert time.monotonic() - started < 5 and not fake.requests


async def test_gemini_3_takes_calls_another_model_wrote() -> None:
    theirs = ToolCall("call_9", "get_weather", {"city": "Rome"})
    transcript = [system("s"), user("q"), Message("assistant", [ReasoningPart(
        "mine", "sig-x", "openai/o3")], [theirs]), tool_result(theirs, "Warm")]
    with FakeOpenAI([reply("Warm in Rome."), reply("again")]) as fake:
        _, response = await collect(gemini(fake, "gemini-3-pro-preview"),
                                    ModelRequest(transcript, [WEATHER]))
        _, _ = await collect(gemini(fake), ModelRequest(transcript, [WEATHER]))
    assert response.message.text == "Warm in Rome."
    sent = [r.body["contents"][1]["parts"][0] for r in fake.requests]
    assert sent[0]["thoughtSignature"] == "skip_thought_signature_validator"
    assert "thoughtSignature" not in sent[1]  # older models need none


def test_a_script_function_sees_a_gemini_request_and_generate_content_answers_whole() -> None:
    seen: list[ModelRequest] = []

    def script(request: ModelRequest) -> Any:
        seen.append(request)
        return calls(call("get_weather", city="Oslo"), text="Looking.")

    contents = [{"role": "user", "parts": [{"text": "Weather?"}]},
                {"role": "model", "parts": [{"functionCall": {
                    "name": "get_weather", "args": {"city": "Paris"}}}]},
                {"role": "user", "parts": [{"functionResponse": {
                    "name": "get_weather", "response": {"error": "no data"}}}]}]
    body = {"systemInstruction": {"parts": [{"text": "be brief"}]}, "contents": contents,
            "tools": [{"functionDeclarations": [{"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY",
                                                     "allowedFunctionNames": ["get_weather"]}},
            "generationConfig": {"maxOutputTokens": 50, "temperature": 0.5,
                                 "thinkingConfig": {"thinkingBudget": 0}}}
    with FakeOpenAI(script) as fake:
        whole = httpx.post(f"{fake.url}/v1beta/models/{MODEL}:generateContent", json=body)
    [request] = seen
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "tool"]
    call_id = request.messages[2].tool_calls[0].id
    result = request.messages[3]
    assert (result.tool_call_id, result.name, result.text, result.is_error) == (
        call_id, "get_weather", "no data", True)
    assert (request.forced_tool, request.max_tokens) == ("get_weather", 50)
    assert (request.settings.temperature, request.settings.thinking_budget) == (0.5, 0)
    candidate = whole.json()["candidates"][0]
    assert candidate["finishReason"] == "STOP"
    assert [list(p) for p in candidate["content"]["parts"]] == [
        ["text"], ["functionCall", "thoughtSignature"]]
    assert whole.json()["usageMetadata"]["promptTokenCount"] > 0


def _stream(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


def _candidate(text: str, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]},
                                 "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


@pytest.mark.parametrize(("finish", "reason"), [
    ("MAX_TOKENS", "length"), ("SAFETY", "content_filter"), ("RECITATION", "content_filter"),
    ("OTHER", "other")])
async def test_finish_reasons_are_mapped(finish: str, reason: str) -> None:
    with FakeOpenAI([recorded(_stream(_candidate("Once upon"), _candidate(" a", finish)))]
                    ) as fake:
        _, response = await collect(gemini(fake))
    assert (response.message.text, response.finish_reason) == ("Once upon a", reason)


@pytest.mark.parametrize(("stream", "kind", "text"), [
    (_stream({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
              "usageMetadata": {"promptTokenCount": 9}}),
     InvalidRequest, "blocked the prompt (PROHIBITED_CONTENT)"),
    (_stream(_candidate("Hel"), {"error": {"code": 503, "status": "UNAVAILABLE",
                                           "message": "Backend went away."}}),
     Unavailable, "Backend went away."),
    (_stream(), InvalidResponse, "ended without a candidate"),
])
async def test_a_blocked_prompt_an_error_event_and_an_empty_stream(
        stream: bytes, kind: type[ModelError], text: str) -> None:
    with FakeOpenAI([recorded(stream)]) as fake, pytest.raises(kind) as caught:
        await collect(gemini(fake))
    assert text in caught.value.message


def test_a_model_that_always_thinks_is_given_its_least_budget_for_zero() -> None:
    off = ModelRequest([user("hi")], settings=ModelSettings(thinking_budget=0))
    pro = GeminiModel("gemini-2.5-pro", base_url="http://127.0.0.1:9", api_key="k")
    flash = GeminiModel(MODEL, base_url="http://127.0.0.1:9", api_key="k")
    assert json.loads(pro.body(off))["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 128, "includeThoughts": True}
    assert json.loads(flash.body(off))["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 0}
