"""The web page as a place to work on an agent (headless Chromium, a real server on loopback
with the fake model): the conversation with the agent's memory, context and settings beside
it on one screen, what a run left shown again from the stored history, agents told apart and
listed a page at a time."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import re
import threading
from typing import Any

import httpx
from playwright.sync_api import expect

from fake_script import Script, held
from stateloop.testing.scripted import call, error, reply
from test_server_support import Server
from test_web_page import new_agent, open_agent, send
from test_web_support import axe_violations, browser, fake, page, screenshot, script, server  # noqa: F401


def on_screen(page: Any, *locators: Any) -> None:
    """Each of ``locators`` wholly inside the window, and nothing wider than it."""
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    for locator in locators:
        box = locator.bounding_box()
        assert box is not None, locator
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (locator, box)
        assert box["y"] >= 0 and box["y"] + box["height"] <= height + 1, (locator, box)
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_a_block_changes_beside_the_conversation_on_one_screen(page: Any, script: Script,
                                                               server: Server) -> None:
    agent = new_agent(server, "bench-watch", tools=["core_memory_append"], tags=["demo"])
    page.set_viewport_size({"width": 1400, "height": 900})
    open_agent(page, agent)
    side = page.get_by_role("complementary", name="The agent at a glance")
    block = side.get_by_role("article", name="Block human")
    expect(block).to_contain_text("Name: Ada")
    settings = side.locator("dl.settings")
    expect(settings).to_contain_text("openai/gpt-4o-mini")
    expect(settings).to_contain_text("core_memory_append")
    expect(settings).to_contain_text("demo")
    expect(side.locator("#bar .bar-caption")).to_contain_text("/ 128,000 tokens")

    second_step = threading.Event()
    script.set(call("core_memory_append", label="human", content="Likes tea."),
               held(second_step, reply("Noted.")))
    try:
        send(page, "I like tea")
        # the block shows the tool's edit while the run still goes, with the chat in view
        expect(block).to_contain_text("Likes tea.")
        expect(block).to_contain_text("changed")
        expect(page.get_by_role("button", name="Cancel run")).to_be_enabled()
        log = page.get_by_role("log", name="Conversation")
        on_screen(page, log, page.get_by_label("Message", exact=True), block, settings,
                  side.locator("#bar"), page.get_by_role("button", name="Cancel run"))
        screenshot(page, "workbench-1400x900")
    finally:
        second_step.set()
    expect(log.get_by_role("article", name="Assistant")).to_contain_text("Noted.")
    expect(log.get_by_text(re.compile("stopped: end_turn"))).to_be_visible()
    expect(block).to_contain_text(re.compile(r"changed \d{1,2}:\d{2}:\d{2}"))  # after the run too
    assert axe_violations(page) == []

    page.set_viewport_size({"width": 1024, "height": 768})
    on_screen(page, log, page.get_by_label("Message", exact=True), block,
              page.get_by_role("button", name="Send", exact=True))
    screenshot(page, "workbench-1024x768")
    side.get_by_role("button", name="Edit settings").click()
    expect(page.get_by_role("tab", name="Settings")).to_have_attribute("aria-selected", "true")


def test_what_runs_left_is_there_after_a_reload_and_a_switch(page: Any, script: Script,
                                                             server: Server) -> None:
    agent = new_agent(server, "bench-history", tools=["shout"], tool_rules=[
        {"type": "requires_approval", "tool_name": "shout"}])
    other = new_agent(server, "bench-other")
    open_agent(page, agent)
    script.set(call("shout", text="a"), reply("Shouted."))
    send(page, "Shout a")
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("article", name="Assistant")).to_contain_text("Shouted.")
    script.set(call("shout", text="b"), reply("Fine."))
    send(page, "Shout b")
    card = page.get_by_role("article", name="Approval requested: shout").last
    card.get_by_label("Reason").fill("not now")
    card.get_by_role("button", name="Deny").click()
    expect(page.get_by_role("article", name="Assistant").last).to_contain_text("Fine.")
    script.set(error("invalid_request", "the model refused this request"))
    send(page, "fail")
    expect(page.get_by_text(re.compile("stopped: ")).last).to_be_visible()

    runs = httpx.get(f"{server.url}/v1/runs", params={"agent_id": agent["id"]}).json()
    reasons = [r["stop_reason"] for r in reversed(runs)]  # oldest first
    for shown in ("reload", "switch"):
        if shown == "reload":
            page.reload()
        else:
            page.get_by_role("button", name=re.compile("^bench-other")).click()
            expect(page.get_by_role("heading", name=other["name"])).to_be_visible()
            page.get_by_role("button", name=re.compile("^bench-history")).click()
        log = page.get_by_role("log", name="Conversation")
        notes = log.locator("p.note.stop")
        expect(notes).to_have_count(len(runs))
        for note, run, reason in zip(notes.all(), reversed(runs), reasons, strict=True):
            expect(note).to_have_text(f"Run {run['id']} stopped: {reason}")
        cards = log.get_by_role("article", name="Tool call: shout")
        expect(cards.nth(0)).to_contain_text("Approved")
        expect(cards.nth(1)).to_contain_text("Denied: not now")
        expect(log.locator("p.note.error")).to_contain_text("the model refused this request")
    screenshot(page, "history-kept")
    assert reasons[:2] == ["requires_approval", "end_turn"] and len(reasons) == 5


def test_edit_the_agent_and_see_the_servers_refusals_at_their_fields(
        page: Any, script: Script, server: Server) -> None:
    agent = new_agent(server, "bench-edit")
    open_agent(page, agent, "Settings")
    form = page.get_by_role("form", name="Settings")
    models = httpx.get(f"{server.url}/v1/models").json()
    expect(form.get_by_label("Model").locator("option")).to_have_count(
        len({m["handle"] for m in models} | {agent["model"]}))
    form.get_by_label("Temperature").fill("5")
    form.get_by_role("button", name="Save settings").click()
    temperature = form.get_by_label("Temperature")
    expect(temperature).to_have_attribute("aria-invalid", "true")
    expect(form.locator("#set-temperature-error")).to_have_text(
        "temperature must be a number from 0 to 2")
    expect(temperature).to_be_focused()
    screenshot(page, "settings-refused")

    temperature.fill("0.5")
    form.get_by_label("Several tool calls in one step (parallel tool calls)").check()
    form.get_by_label("System prompt").fill("You shout back.")
    form.get_by_label("Tags (comma-separated)").fill("bench, loud")
    form.get_by_label("Attach shout").check()
    form.get_by_label("Ask before shout runs").check()
    form.get_by_role("button", name="Add a rule").click()
    rule = form.locator("fieldset.rule").last
    rule.get_by_label("Kind").select_option(label="At most N calls per step")
    rule.get_by_label("Tool", exact=True).select_option("shout")
    rule.get_by_label("Most calls per step").fill("2")
    form.get_by_role("button", name="Add a rule").click()
    bad = form.locator("fieldset.rule").last
    bad.get_by_label("Kind").select_option("conditional")
    bad.get_by_label("Tool", exact=True).select_option("shout")
    bad.get_by_label("Output to next tool (JSON object)").fill("{not json")
    patches: list[str] = []
    page.on("request", lambda r: patches.append(r.url) if r.method == "PATCH" else None)
    form.get_by_role("button", name="Save settings").click()  # checked here, not sent
    mapping = bad.get_by_label("Output to next tool (JSON object)")
    expect(mapping).to_have_attribute("aria-invalid", "true")
    expect(mapping).to_be_focused()
    expect(bad.locator(".field-error:not([hidden])")).to_contain_text(
        "A JSON object from output to tool")
    assert patches == []
    bad.get_by_role("button", name=re.compile("Remove rule")).click()
    form.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("status")).to_have_text("Saved the settings of bench-edit")
    saved = httpx.get(f"{server.url}/v1/agents/{agent['id']}").json()
    assert saved["system"] == "You shout back." and saved["tags"] == ["bench", "loud"]
    assert [t["name"] for t in saved["tools"]] == ["shout"]
    rules = {r["type"]: r for r in saved["tool_rules"]}
    assert rules["max_count_per_step"]["max_count_limit"] == 2
    assert rules["requires_approval"]["tool_name"] == "shout"
    assert saved["model_settings"]["temperature"] == 0.5
    assert saved["model_settings"]["parallel_tool_calls"] is True
    side = page.get_by_role("complementary", name="The agent at a glance")
    expect(side.locator("dl.settings")).to_contain_text("bench, loud")
    kept = page.get_by_role("form", name="Settings").locator("fieldset.rule")
    expect(kept).to_have_count(1)  # the saved rule, read back; edited in place
    expect(kept.get_by_label("Most calls per step")).to_have_value("2")
    kept.get_by_label("Most calls per step").fill("3")
    with page.expect_response(lambda r: r.request.method == "PATCH") as patched:
        page.get_by_role("button", name="Save settings").click()
    assert patched.value.status == 200
    saved = httpx.get(f"{server.url}/v1/agents/{agent['id']}").json()
    assert [r.get("max_count_limit") for r in saved["tool_rules"]
            if r["type"] == "max_count_per_step"] == [3]
    assert axe_violations(page) == []
    screenshot(page, "settings")

    script.set(call("shout", text="x"), reply("ok"))
    page.get_by_role("tab", name="Chat").click()
    send(page, "Shout x")
    expect(page.get_by_role("article", name="Approval requested: shout")).to_be_visible()
    assert script.requests[-1].messages[0].text.startswith("You shout back.")


BROKEN = '''def unlucky(x: int) -> str:
    """Fail on purpose.

    Args:
        x: Ignored.
    """
    print("trying", x)
    raise ValueError("no luck")
'''


def test_write_run_and_attach_a_tool_then_the_agent_calls_it(page: Any, script: Script,
                                                             server: Server) -> None:
    agent = new_agent(server, "bench-tools")
    open_agent(page, agent, "Tool editor")
    form = page.get_by_role("form", name="Tool editor")
    schema = form.get_by_label("JSON schema")
    expect(schema).to_contain_text('"name": "roll_dice"')
    expect(schema).to_contain_text('"sides"')
    args = form.get_by_label("Arguments (JSON)")
    expect(args).to_have_value('{"sides":1,"times":1}')
    args.fill('{"sides": 1, "times": 3}')
    form.get_by_role("button", name="Run").click()
    output = form.locator("#te-output")
    expect(output).to_contain_text("Status: success")
    expect(output.locator(".te-return")).to_have_text("3")
    screenshot(page, "tool-editor-run")

    source = form.get_by_label(re.compile("^Source"))
    original = source.input_value()
    source.fill(BROKEN)
    form.get_by_role("button", name="Generate schema").click()
    expect(schema).to_contain_text('"name": "unlucky"')
    form.get_by_role("button", name="Run").click()
    expect(output).to_contain_text("Status: error")
    expect(output.locator(".te-stderr")).to_contain_text("ValueError: no luck")
    expect(output).to_contain_text("trying 1")  # the sample arguments: x=1
    source.fill("def half(:\n    pass\n")
    form.get_by_role("button", name="Generate schema").click()
    expect(source).to_have_attribute("aria-invalid", "true")
    expect(form.locator("#te-source-error")).not_to_be_empty()
    assert axe_violations(page) == []
    screenshot(page, "tool-editor-refused")

    source.fill(original)
    form.get_by_role("button", name="Save and attach to bench-tools").click()
    expect(page.get_by_role("status")).to_have_text(
        "Saved roll_dice and attached it to bench-tools")
    side = page.get_by_role("complementary", name="The agent at a glance")
    expect(side.locator("dl.settings")).to_contain_text("roll_dice")
    tools = httpx.get(f"{server.url}/v1/agents/{agent['id']}/tools").json()
    assert [t["name"] for t in tools] == ["roll_dice"]

    script.set(call("roll_dice", sides=1, times=2), reply("Rolled 2."))
    page.get_by_role("tab", name="Chat").click()
    send(page, "Roll")
    card = page.get_by_role("article", name="Tool call: roll_dice")
    expect(card).to_contain_text("Result (success)")
    expect(card.locator(".result pre")).to_have_text("2")


def test_make_attach_and_detach_a_block(page: Any, server: Server) -> None:
    agent = new_agent(server, "bench-blocks")
    open_agent(page, agent, "Memory")
    page.get_by_label("Label of the new block").fill("notes")
    page.get_by_label("Value of the new block").fill("Likes herons.")
    page.get_by_label("Limit (characters)").fill("300")
    page.get_by_role("button", name="Make and attach block").click()
    expect(page.get_by_role("status")).to_have_text("Made and attached block notes")
    side = page.get_by_role("complementary", name="The agent at a glance")
    expect(side.get_by_role("article", name="Block notes")).to_contain_text("13 / 300")
    expect(page.get_by_label("notes", exact=True)).to_have_value("Likes herons.")
    blocks = httpx.get(f"{server.url}/v1/agents/{agent['id']}/core-memory/blocks").json()
    assert {b["label"]: b["limit"] for b in blocks} == {"human": 500, "notes": 300}
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Detach notes").click()
    expect(page.get_by_role("status")).to_have_text("Detached block notes")
    expect(side.get_by_role("article", name="Block notes")).to_have_count(0)
    blocks = httpx.get(f"{server.url}/v1/agents/{agent['id']}/core-memory/blocks").json()
    assert [b["label"] for b in blocks] == ["human"]


def test_export_an_agent_file_and_import_it_as_a_copy(page: Any, server: Server,
                                                      tmp_path: Any) -> None:
    agent = new_agent(server, "bench-export")
    open_agent(page, agent)
    with page.expect_download() as downloaded:
        page.get_by_role("button", name="Export agent file").click()
    assert downloaded.value.suggested_filename == "bench-export.af"
    saved = tmp_path / "bench-export.af"
    downloaded.value.save_as(saved)
    assert json.loads(saved.read_text())["agents"][0]["name"] == "bench-export"
    page.get_by_label("Import an agent file").set_input_files(str(saved))
    expect(page.get_by_role("status")).to_have_text("Imported 1 agent")
    # named as Letta names an imported copy, and opened
    expect(page.get_by_role("heading", name="bench-export_copy")).to_be_visible()
    expect(page.get_by_role("button", name=re.compile("^bench-export"))).to_have_count(2)
    copy = page.evaluate("location.hash").lstrip("#")
    assert copy != agent["id"]
    expect(page.locator(".agent-head")).to_contain_text(copy)
    blocks = httpx.get(f"{server.url}/v1/agents/{copy}/core-memory/blocks").json()
    assert [b["value"] for b in blocks] == ["Name: Ada"]


def test_the_agent_list_pages_and_searches_on_the_server(page: Any, server: Server) -> None:
    made = [new_agent(server, f"fleet-{n:02}", memory_blocks=[]) for n in range(52)]
    page.reload()
    nav = page.get_by_role("navigation", name="Agents")
    fleet = nav.get_by_role("button", name=re.compile("^fleet-"))
    expect(fleet.first).to_contain_text("fleet-51")  # newest first
    listed = nav.locator("button.agent").count()
    assert listed == 50
    with page.expect_response(re.compile(r"/v1/agents\?.*after=")):
        nav.get_by_role("button", name="More agents").click()
    expect(fleet).to_have_count(52)
    expect(nav.get_by_role("button", name="More agents")).to_be_hidden()
    with page.expect_response(re.compile(r"/v1/agents\?.*query_text=fleet-07")):
        nav.get_by_label("Search agents").fill("fleet-07")
    expect(fleet).to_have_count(1)
    screenshot(page, "agents-searched")
    for agent in made:
        httpx.delete(f"{server.url}/v1/agents/{agent['id']}").raise_for_status()
