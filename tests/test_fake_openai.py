"""The fake provider server as a client sees it: plain HTTP and SSE over a loopback socket."""

from __future__ import annotations

import base64
import json
import math
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import pytest

from patience import ANSWERS, STOPS
from stateloop.llm.base import ModelRequest
from stateloop.testing import call, error, raw_call, reply
from stateloop.testing.fake_openai import FakeOpenAI, dropped_connection, rate_limited
from stateloop.testing.scripted import ScriptItem

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def sse_data(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def test_a_held_stream_pauses_after_its_chunks_until_released() -> None:
    with FakeOpenAI([reply("x" * 80)], hold_after=3) as fake:
        lines: list[str] = []

        def read() -> None:
            with httpx.stream("POST", f"{fake.base_url}/chat/completions",
                              json={**CHAT, "stream": True}, timeout=ANSWERS) as response:
                lines.extend(line for line in response.iter_lines() if line)

        reader = threading.Thread(target=read)
        reader.start()
        deadline = time.monotonic() + ANSWERS
        while len(lines) < 3:
            assert time.monotonic() < deadline and reader.is_alive(), lines
            time.sleep(0.01)
        time.sleep(0.5)
        assert len(lines) == 3 and reader.is_alive()  # held: nothing more comes
        fake.release.set()
        reader.join(ANSWERS)
    assert len(lines) > 3 and lines[-1] == "data: [DONE]"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in
                   sse_data("\n".join(lines)) if c["choices"]) == "x" * 80


def test_streaming_chat_completion_is_openai_sse() -> None:
    with FakeOpenAI([raw_call("add", '{"a": 1}')], chunk_size=4) as fake:
        response = httpx.post(f"{fake.base_url}/chat/completions",
                              json={**CHAT, "stream": True,
                                    "stream_options": {"include_usage": True}})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.rstrip().endswith("data: [DONE]")
    chunks = sse_data(response.text)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    calls = [d["tool_calls"][0] for c in chunks for choice in c["choices"]
             if (d := choice["delta"]).get("tool_calls")]
    assert calls[0]["function"]["name"] == "add" and calls[0]["id"].startswith("call_")
    assert "".join(c["function"]["arguments"] for c in calls) == '{"a": 1}'
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0


def test_non_streaming_chat_and_messages() -> None:
    with FakeOpenAI([reply("Hello", reasoning="hmm"), reply("Hi")]) as fake:
        chat = httpx.post(f"{fake.base_url}/chat/completions", json=CHAT).json()
        message = httpx.post(f"{fake.base_url}/messages",
                             headers={"anthropic-version": "2023-06-01"},
                             json={**CHAT, "max_tokens": 10}).json()
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"] == {"role": "assistant", "content": "Hello",
                                             "reasoning_content": "hmm"}
    assert message["type"] == "message" and message["stop_reason"] == "end_turn"
    assert message["content"] == [{"type": "text", "text": "Hi"}]


def test_streaming_messages_is_anthropic_sse() -> None:
    with FakeOpenAI([call("add", a=1, b=2)]) as fake:
        response = httpx.post(f"{fake.url}/v1/messages",
                              headers={"anthropic-version": "2023-06-01"},
                              json={**CHAT, "max_tokens": 10, "stream": True})
    names = [line[7:] for line in response.text.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    data = sse_data(response.text)
    partial = "".join(d["delta"]["partial_json"] for d in data
                      if d["type"] == "content_block_delta")
    assert json.loads(partial) == {"a": 1, "b": 2}
    assert data[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}


def test_rejects_unpaired_tool_calls_and_results_like_the_services() -> None:
    call_message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    orphan = {"role": "tool", "tool_call_id": "call_9", "content": "x"}
    with FakeOpenAI([reply("never")]) as fake:
        unanswered = httpx.post(f"{fake.base_url}/chat/completions", json={
            **CHAT, "messages": [*CHAT["messages"], call_message]})
        orphaned = httpx.post(f"{fake.base_url}/chat/completions", json={
            **CHAT, "messages": [*CHAT["messages"], orphan]})
        anthropic = httpx.post(f"{fake.url}/v1/messages",
                               headers={"anthropic-version": "2023-06-01"}, json={
            **CHAT, "max_tokens": 5, "messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}]}]})
        assert fake.remaining == 1  # a rejected request plays nothing
    assert unanswered.status_code == orphaned.status_code == anthropic.status_code == 400
    assert "did not have response messages: call_1" in unanswered.json()["error"]["message"]
    assert "must be a response to a preceeding message" in orphaned.json()["error"]["message"]
    assert "unexpected `tool_use_id`" in anthropic.json()["error"]["message"]


def test_faults_come_first_and_carry_retry_after() -> None:
    with FakeOpenAI([reply("ok")], faults=[rate_limited(2), error("server_error")]) as fake:
        limited = httpx.post(f"{fake.base_url}/chat/completions", json=CHAT)
        failed = httpx.post(f"{fake.base_url}/chat/completions", json=CHAT)
        served = httpx.post(f"{fake.base_url}/chat/completions", json=CHAT)
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
    assert limited.headers["retry-after-ms"] == "2000"
    assert failed.status_code == 500
    assert served.json()["choices"][0]["message"]["content"] == "ok"


def test_dropped_connection_cuts_the_body() -> None:
    with FakeOpenAI([reply("x" * 100)], faults=[dropped_connection(2)]) as fake:
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(f"{fake.base_url}/chat/completions", json={**CHAT, "stream": True})
        assert fake.remaining == 1  # served again on the retry


def test_script_function_sees_the_request_and_latency_delays() -> None:
    seen: list[ModelRequest] = []

    def script(request: ModelRequest) -> ScriptItem:
        seen.append(request)
        return reply(f"{len(request.tools)} tools, last: {request.messages[-1].text}")

    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    with FakeOpenAI(script, latency=0.2) as fake:
        started = time.perf_counter()
        body = httpx.post(f"{fake.base_url}/chat/completions",
                          json={**CHAT, "tools": tools, "tool_choice": "required"}).json()
        elapsed = time.perf_counter() - started
    assert body["choices"][0]["message"]["content"] == "1 tools, last: hi"
    assert seen[0].tool_choice == "required" and seen[0].messages[0].role == "user"
    assert elapsed >= 0.2


def test_exhausted_script_is_a_clear_error() -> None:
    with FakeOpenAI([reply("only")]) as fake:
        httpx.post(f"{fake.base_url}/chat/completions", json=CHAT)
        second = httpx.post(f"{fake.base_url}/chat/completions", json=CHAT)
    assert second.status_code == 400
    assert "script has 1 items" in second.json()["error"]["message"]


def test_embeddings_are_deterministic_unit_vectors() -> None:
    texts = ["the cat sat on the mat", "a cat on a mat", "stock market report"]
    with FakeOpenAI(embedding_dimensions=32) as fake:
        data = httpx.post(f"{fake.base_url}/embeddings",
                          json={"model": "text-embedding-3-small", "input": texts}).json()
        again = httpx.post(f"{fake.base_url}/embeddings",
                           json={"model": "m", "input": texts[0],
                                 "encoding_format": "base64"}).json()
    vectors = [d["embedding"] for d in data["data"]]
    assert all(len(v) == 32 and math.isclose(sum(x * x for x in v), 1.0) for v in vectors)
    cosine = [sum(a * b for a, b in zip(vectors[0], v, strict=True)) for v in vectors[1:]]
    assert cosine[0] > cosine[1]  # shared words point alike
    decoded = struct.unpack("<32f", base64.b64decode(again["data"][0]["embedding"]))
    assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(decoded, vectors[0], strict=True))


def test_stop_releases_the_port() -> None:
    fake = FakeOpenAI([reply("x")]).start()
    url = fake.base_url
    fake.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{url}/chat/completions", json=CHAT)


def test_runs_as_a_module(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"reply": "scripted hello"}]))
    process = subprocess.Popen(
        [sys.executable, "-m", "stateloop.testing.fake_openai", "--port", str(port),
         "--script", str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert f"127.0.0.1:{port}/v1" in process.stdout.readline()
        body = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT).json()
        assert body["choices"][0]["message"]["content"] == "scripted hello"
    finally:
        process.terminate()
        process.wait(timeout=STOPS)


def test_the_package_exports_the_fake_on_first_use() -> None:
    import stateloop.testing as testing
    from stateloop.testing import fake_openai

    assert testing.FakeOpenAI is fake_openai.FakeOpenAI
    assert testing.rate_limited is fake_openai.rate_limited
    with pytest.raises(AttributeError, match="no attribute 'FakeAnthropic'"):
        testing.FakeAnthropic  # noqa: B018


def test_a_script_function_sees_the_transcript_of_either_wire_format() -> None:
    seen: list[ModelRequest] = []

    def script(request: ModelRequest) -> ScriptItem:
        seen.append(request)
        return reply("ok")

    with FakeOpenAI(script) as fake:
        httpx.post(f"{fake.base_url}/chat/completions", json=CHAT)
        httpx.post(f"{fake.base_url}/messages", headers={"anthropic-version": "2023-06-01"},
                   json={**CHAT, "max_tokens": 10, "system": "be brief"})
    assert [[m.role for m in r.messages] for r in seen] == [["user"], ["system", "user"]]
    assert seen[1].messages[0].text == "be brief"
