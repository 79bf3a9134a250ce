"""The web page in headless Chromium against a real server on loopback with the fake model:
agents, chat with streamed tool calls, approvals, memory, the context window, runs, tools."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from fake_script import Script, held
from patience import ANSWERS
from stateloop.testing.scripted import call, error, reply
from test_server_support import Server
from test_web_support import browser, fake, page, screenshot, script, server  # noqa: F401 (fixtures)


def new_agent(server: Server, name: str, **options: Any) -> dict[str, Any]:
    options.setdefault("memory_blocks", [{"label": "human", "value": "Name: Ada", "limit": 500}])
    body = {"name": name, "model": "openai/gpt-4o-mini", "include_base_tools": False, **options}
    response = httpx.post(f"{server.url}/v1/agents", json=body, timeout=ANSWERS)
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def open_agent(page: Any, agent: dict[str, Any], tab: str = "Chat") -> None:
    page.reload()
    page.get_by_role("button", name=re.compile(re.escape(agent["name"]))).click()
    expect(page.get_by_role("heading", name=agent["name"])).to_be_visible()
    page.get_by_role("tab", name=tab).click()


def send(page: Any, text: str) -> None:
    """Send a new message once the last run has ended (Enter while a run goes steers it)."""
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    type_and_enter(page, text)


def type_and_enter(page: Any, text: str) -> None:
    page.get_by_label("Message", exact=True).fill(text)
    page.get_by_label("Message", exact=True).press("Enter")


def test_create_an_agent_and_chat_with_a_streamed_tool_call(page: Any, script: Script,
                                                           server: Server) -> None:
    page.keyboard.press("n")  # the shortcut opens the dialog
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Name").fill("web-ada")
    dialog.get_by_label("System prompt (empty: the default)").fill("You shout.")
    dialog.get_by_label("Agent type").select_option("react_agent")
    dialog.get_by_role("button", name="Add a block").click()
    dialog.get_by_label("Label").nth(2).fill("notes")
    dialog.get_by_label("Value").nth(2).fill("Likes caps.")
    dialog.get_by_label("shout").check()
    dialog.get_by_label("Memory tools (the base set)").uncheck()
    screenshot(page, "create-agent")
    dialog.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="web-ada")).to_be_visible()
    agent_id = page.evaluate("location.hash").lstrip("#")
    made = httpx.get(f"{server.url}/v1/agents/{agent_id}").json()
    assert made["system"] == "You shout." and [t["name"] for t in made["tools"]] == ["shout"]
    assert made["agent_type"] == "react_agent"
    assert {b["label"]: b["value"] for b in made["blocks"]} == {
        "persona": "I am a helpful assistant.", "human": "", "notes": "Likes caps."}

    script.set(call("shout", text="hello"), reply("It said HELLO.", reasoning="Shouting first."))
    with page.expect_response(re.compile(r"/messages/stream$")) as streamed:
        send(page, "Shout hello")
    assert streamed.value.headers["content-type"].startswith("text/event-stream")
    assert json.loads(streamed.value.request.post_data)["stream_tokens"] is True
    log = page.get_by_role("log", name="Conversation")
    expect(log.get_by_text("Run run-")).to_contain_text("end_turn")
    card = log.get_by_role("article", name="Tool call: shout")
    expect(card).to_contain_text('"text": "hello"')
    expect(card).to_contain_text("Result (success)")
    expect(card).to_contain_text("HELLO")
    expect(log.get_by_role("article", name="Reasoning")).to_have_text(re.compile("Shouting first."))
    expect(log.get_by_role("article", name="Assistant")).to_contain_text("It said HELLO.")
    expect(log.get_by_text("Run run-")).to_contain_text(re.compile(r"2 steps · \d+ tokens"))
    screenshot(page, "chat")
    # the history reads the same after a reload
    page.reload()
    expect(page.get_by_role("article", name="Tool call: shout")).to_contain_text("HELLO")


def approval_rules(server: Server, agent_id: str) -> list[str]:
    state = httpx.get(f"{server.url}/v1/agents/{agent_id}").json()
    return [r["tool_name"] for r in state["tool_rules"] if r["type"] == "requires_approval"]


def test_toggle_approval_then_approve_and_deny_inline(page: Any, script: Script,
                                                       server: Server) -> None:
    agent = new_agent(server, "careful", tools=["shout"])
    open_agent(page, agent, "Tools")
    page.locator("details.tool summary").first.click()  # opens the tool's details
    expect(page.locator("details.tool pre").last).to_contain_text('"name": "shout"')
    page.get_by_label("Ask for approval before each call (this agent)").check()
    expect(page.get_by_role("status")).to_have_text("shout: asks for approval")
    assert approval_rules(server, agent["id"]) == ["shout"]
    screenshot(page, "tools")

    page.get_by_role("tab", name="Chat").click()
    script.set(call("shout", text="a"), reply("Shouted."))
    send(page, "Shout a")
    card = page.get_by_role("article", name="Approval requested: shout")
    expect(card.get_by_role("button", name="Approve")).to_be_focused()
    expect(card).to_contain_text('"text": "a"')
    screenshot(page, "approval")
    card.get_by_role("button", name="Approve").click()
    expect(card).to_contain_text("Result (success)")
    expect(page.get_by_role("article", name="Assistant").last).to_contain_text("Shouted.")
    assert script.requests[-1].messages[-1].text == "A"

    script.set(call("shout", text="b"), reply("Fine, I won't."))
    send(page, "Shout b")
    card = page.get_by_role("article", name="Approval requested: shout").last
    card.get_by_label("Reason").fill("not now")
    card.get_by_role("button", name="Deny").click()
    expect(card).to_contain_text("Denied: not now")
    expect(page.get_by_role("article", name="Assistant").last).to_contain_text("Fine, I won't.")
    assert "not now" in script.requests[-1].messages[-1].text

    page.get_by_role("tab", name="Tools").click()
    page.locator("details.tool summary").first.click()
    page.get_by_label("Ask for approval before each call (this agent)").uncheck()
    expect(page.get_by_role("status")).to_have_text("shout: runs without asking")
    assert approval_rules(server, agent["id"]) == []


def test_edit_a_block_and_the_next_request_carries_it(page: Any, script: Script,
                                                      server: Server) -> None:
    agent = new_agent(server, "memorable", memory_blocks=[
        {"label": "human", "value": "Name: Ada", "limit": 500},
        {"label": "policy", "value": "Be kind.", "read_only": True}])
    open_agent(page, agent, "Memory")
    human = page.get_by_label("human", exact=True)
    expect(page.get_by_text("9 / 500 characters")).to_be_visible()
    human.fill("Name: Grace Hopper")
    expect(page.get_by_text("18 / 500 characters")).to_be_visible()
    human.press("Control+Enter")
    expect(page.get_by_role("status")).to_have_text("Saved block human")
    policy = page.get_by_label("policy (read-only)")
    expect(policy).to_have_attribute("readonly", "")
    expect(page.get_by_role("button", name=re.compile("Save policy"))).to_have_count(0)

    httpx.post(f"{server.url}/v1/agents/{agent['id']}/archival-memory",
               json={"text": "Grace wrote the first compiler."}).raise_for_status()
    page.get_by_label("New passage").fill("Ada wrote the first program.")
    page.get_by_role("button", name="Insert").click()
    passages = page.locator(".passages").first
    expect(passages.locator("li")).to_have_count(2)
    page.get_by_label("Search passages").fill("compiler")
    page.get_by_role("button", name="Search").first.click()
    expect(passages.locator("li").first).to_contain_text("first compiler")
    passages.get_by_role("button", name=re.compile("Delete passage")).first.click()
    page.get_by_label("Search passages").fill("")
    page.get_by_role("button", name="Search").first.click()
    expect(passages.locator("li")).to_have_count(1)
    expect(passages).to_contain_text("first program")

    script.set(reply("Hello Grace."))
    page.get_by_role("tab", name="Chat").click()
    send(page, "Who am I?")
    expect(page.get_by_role("article", name="Assistant")).to_contain_text("Hello Grace.")
    assert "Name: Grace Hopper" in script.requests[-1].messages[0].text

    page.get_by_role("tab", name="Memory").click()
    page.get_by_label("Search history").fill("Who am I")
    page.get_by_role("button", name="Search").last.click()
    expect(page.locator(".passages").last).to_contain_text("Who am I?")
    screenshot(page, "memory")


def caption(page: Any) -> int:
    text = page.locator("#bar .bar-caption").inner_text()
    return int(text.split(" / ")[0].replace(",", ""))


def test_context_bar_follows_each_step_and_shows_the_messages(page: Any, script: Script,
                                                              server: Server) -> None:
    agent = new_agent(server, "contextual", tools=["shout"])
    open_agent(page, agent)
    expect(page.locator("#bar .bar-caption")).to_be_visible()
    before = caption(page)
    second_step = threading.Event()
    script.set(call("shout", text="x" * 400), held(second_step, reply("done")))
    try:
        send(page, "Shout a lot")
        expect(page.get_by_role("article", name="Tool call: shout")).to_contain_text("Result")
        # the bar moves after the first step, while the second is still running
        expect(page.locator("#bar .bar-caption")).not_to_have_text(
            f"{before:,} / 128,000 tokens")
        expect(page.get_by_role("button", name="Cancel run")).to_be_enabled()
    finally:
        second_step.set()
    expect(page.get_by_role("article", name="Assistant")).to_contain_text("done")

    page.get_by_role("tab", name="Context").click()
    overview = httpx.get(f"{server.url}/v1/agents/{agent['id']}/context").json()
    bar = page.locator("#panel").get_by_role("img")
    expect(bar).to_have_attribute("aria-label", re.compile(
        f"{overview['context_window_size_current']} of 128000 tokens used .*"
        f"Tool definitions {overview['num_tokens_functions_definitions']}.*"
        f"Messages {overview['num_tokens_messages']}"))
    legend = page.get_by_role("table")
    expect(legend.get_by_role("row", name=re.compile("Core memory"))).to_contain_text(
        str(overview["num_tokens_core_memory"]))
    page.get_by_role("button", name="Show the messages in context").click()
    items = page.get_by_role("list", name="Messages in context").locator("li")
    expect(items).to_have_count(len(overview["messages"]))
    expect(items.nth(2)).to_contain_text("shout(")
    screenshot(page, "context")


def test_cancel_a_slow_run_and_see_it_in_runs(page: Any, script: Script,
                                              server: Server) -> None:
    agent = new_agent(server, "slowpoke")
    open_agent(page, agent)
    never = threading.Event()  # the model answers only after the run is cancelled
    script.set(held(never, reply("too late")))
    try:
        send(page, "Take your time")
        cancel = page.get_by_role("button", name="Cancel run")
        expect(cancel).to_be_enabled()
        # another view and back: the run in flight is still there, and still cancellable
        page.keyboard.press("Alt+2")
        expect(page.get_by_role("heading", name="Core memory")).to_be_visible()
        page.keyboard.press("Alt+1")
        expect(page.get_by_role("article", name="You")).to_have_text(
            re.compile("Take your time"))
        expect(cancel).to_be_enabled()
        page.get_by_label("Message", exact=True).press("Escape")
        expect(page.get_by_text(re.compile("stopped: cancelled"))).to_be_visible()
        expect(cancel).to_be_disabled()
    finally:
        never.set()
    screenshot(page, "cancelled")

    page.get_by_role("tab", name="Runs").click()
    run = page.locator("details.run").first
    expect(run).to_contain_text("cancelled")


def test_steer_a_run_in_flight(page: Any, script: Script, server: Server) -> None:
    agent = new_agent(server, "steerable", tools=["shout"])
    open_agent(page, agent)
    first_step = threading.Event()  # the first step waits until the steer is in
    script.set(held(first_step, call("shout", text="a")), reply("Steered."))
    try:
        send(page, "Shout a")
        expect(page.get_by_role("button", name="Steer", exact=True)).to_be_enabled()
        type_and_enter(page, "also say bye")  # Enter steers while the run goes
        expect(page.get_by_text("Steered (delivered): also say bye")).to_be_visible()
    finally:
        first_step.set()
    expect(page.get_by_role("article", name="Assistant")).to_contain_text("Steered.")
    assert "also say bye" in script.requests[-1].messages[-1].text


def test_runs_timeline_and_a_failed_runs_error(page: Any, script: Script,
                                               server: Server) -> None:
    agent = new_agent(server, "timed", tools=["shout"])
    open_agent(page, agent)
    script.set(call("shout", text="t"), reply("ok"))
    send(page, "go")
    expect(page.get_by_text(re.compile("stopped: end_turn"))).to_be_visible()
    script.set(error("invalid_request", "the model refused this request"))
    send(page, "fail")
    expect(page.get_by_text(re.compile("stopped: "))).to_have_count(2)

    page.get_by_role("tab", name="Runs").click()
    runs = page.locator("details.run")
    expect(runs).to_have_count(2)
    runs.nth(0).locator("summary").click()  # newest first: the failed run
    expect(runs.nth(0).get_by_role("alert")).to_contain_text("the model refused this request")
    runs.nth(1).locator("summary").click()
    steps = runs.nth(1).locator("li.step")
    expect(steps).to_have_count(2)
    # The step's time, its model call's and its tool's, as measured; never "0.0 ms". The
    # answering step called no tool: no tool time.
    figure = r"\d+(\.\d)? ms"
    expect(steps.nth(0).locator(".step-time")).to_have_text(
        re.compile(rf"^{figure} · model {figure} · tools {figure}$"))
    expect(steps.nth(1).locator(".step-time")).to_have_text(
        re.compile(rf"^{figure} · model {figure}$"))
    expect(steps.nth(0)).not_to_contain_text(re.compile(r"(^|\D)0\.0 ms"))
    expect(runs.nth(1).locator("p.ttft")).to_have_text(re.compile(rf"^First token after {figure}$"))
    expect(steps.nth(0)).to_contain_text(re.compile(r"\d+ in / \d+ out tokens"))
    expect(steps.nth(0)).to_contain_text("Tools: shout (success)")
    screenshot(page, "runs")


def test_a_stored_agent_the_server_cannot_read_is_listed_with_a_warning(
        page: Any, server: Server) -> None:
    agent = new_agent(server, "spoiled")
    url = server.server.config.app.state.runtime.settings.database_url  # type: ignore[attr-defined]
    with sqlite3.connect(Path(url.removeprefix("sqlite:///"))) as con:  # an older version's row
        config = {**agent["llm_config"], "max_tokens": float("inf")}
        con.execute("UPDATE agents SET llm_config = ? WHERE id = ?",
                    (json.dumps(config), agent["id"]))
    con.close()
    page.reload()
    entry = page.get_by_role("button", name=re.compile("spoiled"))
    expect(entry).to_contain_text("cannot be read")
    entry.click()
    expect(page.locator("#status")).to_contain_text("llm_config.max_tokens")
    screenshot(page, "unreadable-agent")
    assert httpx.delete(f"{server.url}/v1/agents/{agent['id']}").status_code == 200


def test_agents_that_share_a_name_are_told_apart_by_id(page: Any, server: Server) -> None:
    """An agent imported next to its original (or made twice) under one name: the list says
    so and shows the end of each one's id and when it was made; the open agent's whole id is
    in its header."""
    first, second = new_agent(server, "twin"), new_agent(server, "twin")
    alone = new_agent(server, "single")
    page.reload()
    entries = page.get_by_role("button", name=re.compile("^twin"))
    expect(entries).to_have_count(2)
    made = r"\d{1,2}\D\d{1,2}\D\d{2,4},? \d{1,2}:\d{2}:\d{2}"
    for agent in (first, second):
        expect(page.get_by_role("button", name=re.compile(
            f"^twin .* 2 named so · …{agent['id'][-8:]} · {made}"))).to_have_count(1)
    expect(page.get_by_role("button", name=re.compile("^single"))).not_to_contain_text(
        "named so")
    expect(page.get_by_role("button", name=re.compile("^single"))).to_contain_text(
        alone["id"][-8:])
    page.get_by_role("button", name=re.compile(f"…{second['id'][-8:]}")).click()
    expect(page.locator(".agent-head")).to_contain_text(second["id"])
    screenshot(page, "same-name")
    for agent in (first, second, alone):
        assert httpx.delete(f"{server.url}/v1/agents/{agent['id']}").status_code == 200
