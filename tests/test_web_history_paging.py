"""An agent with 10,000 messages in the web page: its newest page is drawn first, quickly
(the time from navigation to the newest message on screen is measured and reported), and
earlier pages come on demand without moving what the reader is looking at."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import copy
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from fake_script import Script
from patience import ANSWERS
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply
from test_server_support import Server, settings_for
from test_web_support import SCREENS, browser, fake, page, screenshot, script  # noqa: F401

MESSAGES = 10_000
PAGE = 50  # chat.js draws this many at a time


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("web-paging") / "stateloop.db"
    with Server(settings_for(fake, db)) as running:
        yield running


def long_agent(server: Server, script: Script) -> str:
    """An agent whose history holds ``MESSAGES`` messages after its system message: one
    exchange made, exported, repeated and imported as an agent file."""
    made = httpx.post(f"{server.url}/v1/agents", json={
        "name": "long-history", "model": "openai/gpt-4o-mini", "include_base_tools": False})
    made.raise_for_status()
    agent_id = made.json()["id"]
    script.set(reply("hi"))
    httpx.post(f"{server.url}/v1/agents/{agent_id}/messages", json={"input": "hello"},
               timeout=60).raise_for_status()
    exported = httpx.get(f"{server.url}/v1/agents/{agent_id}/export", timeout=60).json()
    agent = exported["agents"][0]
    system, asked, answered = agent["messages"][0], agent["messages"][-2], agent["messages"][-1]
    messages = [system]
    for n in range(MESSAGES // 2):
        for template, text in ((asked, f"question {n}"), (answered, f"answer {n}")):
            message = copy.deepcopy(template)
            message["id"] = f"message-{len(messages)}"
            message["content"][0]["text"] = text
            messages.append(message)
    agent["messages"] = messages
    agent["in_context_message_ids"] = ["message-0"] + [m["id"] for m in messages[-20:]]
    imported = httpx.post(
        f"{server.url}/v1/agents/import", timeout=300, headers={"X-Requested-With": "test"},
        files={"file": ("long.af", json.dumps(exported).encode(), "application/json")})
    imported.raise_for_status()
    return imported.json()["agent_ids"][0]  # type: ignore[no-any-return]


# Installed before the page's own scripts: the time (since navigation) the newest message
# first shows in the conversation.
WATCH = """
new MutationObserver((_, observer) => {
  const log = document.querySelector('[role=log]');
  if (log && log.textContent.includes('NEWEST')) {
    window.painted = performance.now();
    observer.disconnect();
  }
}).observe(document, {childList: true, subtree: true, characterData: true});
""".replace("NEWEST", f"answer {MESSAGES // 2 - 1}")


def first_paint(page: Any, url: str) -> float:
    page.goto("about:blank")  # a load, not a move to another #fragment of the same page
    page.goto(url)
    # polled from here: the page's CSP forbids the string evaluation wait_for_function uses
    deadline = time.monotonic() + ANSWERS
    while (painted := page.evaluate("window.painted")) is None:
        assert time.monotonic() < deadline, "the newest message never showed"
        page.wait_for_timeout(20)
    return float(painted)


def test_first_paint_of_an_agent_with_10000_messages(page: Any, script: Script, server: Server,
                                                     record_property: Callable[..., None]
                                                     ) -> None:
    agent_id = long_agent(server, script)
    count = len(httpx.get(f"{server.url}/v1/agents/{agent_id}/messages",
                          params={"limit": 1000, "order": "asc"}).json())
    assert count == 1000  # the history is longer than one listing can hold
    page.add_init_script(WATCH)
    url = f"{server.url}/#{agent_id}"
    timings = [first_paint(page, url) for _ in range(3)]
    median = statistics.median(timings)
    record_property("first_paint_ms", [round(t) for t in timings])
    figure = (f"first paint of an agent with {MESSAGES} messages: "
              f"{', '.join(f'{t:.0f}' for t in timings)} ms (median {median:.0f} ms)")
    print(figure)
    SCREENS.parent.mkdir(parents=True, exist_ok=True)
    (SCREENS.parent / "web-first-paint.txt").write_text(figure + "\n")
    # The aim is 1 s on a quiet machine; a loaded one (CI beside it) gets room.
    assert median <= 3000, figure

    log = page.get_by_role("log", name="Conversation")
    articles = log.locator("article")
    expect(articles).to_have_count(PAGE)
    expect(articles.last).to_have_text("Assistantanswer 4999")
    screenshot(page, "long-history")
    earlier = log.get_by_role("button", name="Load earlier messages")
    log.evaluate("el => { el.scrollTop = 0; }")  # up to the top, where the button is
    newest_top = articles.nth(0).evaluate("el => el.getBoundingClientRect().top")
    earlier.click()
    expect(articles).to_have_count(2 * PAGE)
    expect(articles.nth(0)).to_contain_text(f"question {MESSAGES // 2 - PAGE}")
    # what the reader looked at stays where it was: the earlier page went above it
    moved = articles.nth(PAGE).evaluate("el => el.getBoundingClientRect().top")
    assert abs(moved - newest_top) < 60, (moved, newest_top)
    expect(log.get_by_role("button", name="Load earlier messages")).to_have_count(1)
