"""A 300-turn conversation in a small window, through a real HTTP provider that rejects
prompts over its window and transcripts with unanswered calls."""

from __future__ import annotations

import json
import re
from pathlib import Path

from stateloop import Agent, Block, tool
from stateloop.llm.base import ModelRequest
from stateloop.testing import assert_transcript_valid, call, reply
from stateloop.testing.fake_openai import FakeOpenAI

WINDOW = 3000
TURNS = 300


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: mild, light wind from the west, 14 degrees, humidity 60 percent"


def play(request: ModelRequest):
    """The model: answers each turn, checks the weather every fifth turn, and at the last
    turn searches its recall for the locker code."""
    first = request.messages[0].text
    if first.startswith("You keep the running summary"):
        return reply("## Goals\nChat with the user.\n## Current state\nMany turns so far.")
    last = request.messages[-1]
    if last.role == "tool":
        asked = next(m for m in reversed(request.messages) if m.role == "assistant")
        if asked.tool_calls[0].name == "conversation_search":
            return reply(f"From my notes: {last.text}")
        return reply("The weather is mild today, with a light westerly wind.")
    match = re.match(r"Turn (\d+):", last.text)
    number = int(match.group(1)) if match else 0
    if number == TURNS:
        return call("conversation_search", query="locker code")
    if number % 5 == 0:
        return call("weather", city=f"City{number}")
    return reply(f"Thanks for turn {number}; I have noted what you said about it.")


async def test_three_hundred_turns_in_a_small_window(tmp_path: Path):
    with FakeOpenAI(play, context_window=WINDOW) as fake:
        agent = await Agent.acreate(
            model="openai/gpt-4o-mini", base_url=fake.base_url, api_key="test",
            context_window=WINDOW, tools=[weather], blocks=[Block("human", "")],
            store=f"sqlite:///{tmp_path / 'long.db'}", name="long")
        compactions = 0
        for number in range(1, TURNS + 1):
            if number == 3:
                text = f"Turn {number}: my locker code is 4471, please remember it."
            elif number == TURNS:
                text = f"Turn {number}: what is my locker code?"
            else:
                text = (f"Turn {number}: here is some news about my day, number {number}, "
                        f"with a few more words so the context fills up steadily.")
            async for event in agent.stream(text):
                if event.type == "compaction":
                    compactions += 1
                elif event.type == "run_end":
                    assert event.stop_reason == "end_turn", (number, event.error)
        assert fake.overflows == 0  # no prompt over the window ever reached the provider
        assert compactions >= 5
        search = next(m for m in agent.messages if m.name == "conversation_search")
        found = json.loads(search.text)
        assert any("locker code is 4471" in hit["content"] for hit in found)
        assert "4471" in agent.messages[-1].text
        assert_transcript_valid(agent.messages)
        assert max(len(r.body["messages"]) for r in fake.requests) < 60
        store = agent.store
        assert store is not None
        assert await store.count_messages(agent.id) > 2 * TURNS  # evicted, still stored
