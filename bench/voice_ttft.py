"""Time to first token through the voice path against the agent's plain streamed send.

One server on a SQLite file, the fake OpenAI server as model (each call ``MODEL_LATENCY``
seconds before its first chunk), one agent with ``enable_sleeptime`` (its memory agent runs
in the background after each turn, as a voice agent's does). Each round sends one turn
through ``POST /v1/voice-beta/{id}/chat/completions`` and one through
``POST /v1/agents/{id}/messages/stream`` (``stream_tokens``), in alternating order, and times
each from the request to the first byte of assistant text over loopback. Medians, p90s and
their ratio are printed; a few seconds in all.

    python bench/voice_ttft.py
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from stateloop.llm.base import ModelRequest
from stateloop.server import bind, create_app
from stateloop.server.settings import ServerSettings
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import ScriptItem, reply

ROUNDS = 25
MODEL_LATENCY = 0.02


def answer(request: ModelRequest) -> ScriptItem:
    return reply("Sure, here is a short spoken answer for you.")


def first_text(http: httpx.Client, url: str, body: dict[str, object], marker: str) -> float:
    """Seconds from sending ``body`` to the first event holding ``marker`` (then read on)."""
    started = time.perf_counter()
    first = None
    with http.stream("POST", url, json=body) as response:
        for line in response.iter_lines():
            if first is None and marker in line:
                first = time.perf_counter() - started
    assert first is not None, f"no assistant text from {url}"
    return first


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI(answer, latency=MODEL_LATENCY,
                                                          chunk_size=4) as fake:
        settings = ServerSettings(database_url=f"sqlite:///{Path(tmp) / 'bench.db'}",
                                  model_base_url=fake.base_url, model_api_key="test")
        sock = bind("127.0.0.1", 0)
        server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with httpx.Client(base_url=url, timeout=60) as http:
            agent = http.post("/v1/agents/", json={
                "model": "openai/gpt-4o-mini", "include_base_tools": False,
                "enable_sleeptime": True,
                "memory_blocks": [{"label": "human", "value": "Name: Ada"}]}).json()
            voice = f"/v1/voice-beta/{agent['id']}/chat/completions"
            plain = f"/v1/agents/{agent['id']}/messages/stream"
            said = {"messages": [{"role": "user", "content": "Hello"}]}
            times: dict[str, list[float]] = {"voice": [], "plain": []}
            for round_ in range(ROUNDS + 2):  # two warm-up rounds
                order = ["voice", "plain"] if round_ % 2 else ["plain", "voice"]
                for path in order:
                    if path == "voice":
                        took = first_text(http, voice, said, '"content"')
                    else:
                        took = first_text(http, plain, {**said, "stream_tokens": True},
                                          '"assistant_message"')
                    if round_ >= 2:
                        times[path].append(took)
        server.should_exit = True
        thread.join(timeout=5)
    for path, found in times.items():
        found.sort()
        print(f"{path:6} time to first token: median {statistics.median(found) * 1000:.1f} ms,"
              f" p90 {found[int(len(found) * 0.9)] * 1000:.1f} ms ({len(found)} turns)")
    ratio = statistics.median(times["voice"]) / statistics.median(times["plain"])
    print(f"voice / plain (medians): {ratio:.2f}")


if __name__ == "__main__":
    main()
