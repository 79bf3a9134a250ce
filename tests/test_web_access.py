"""The web page's reach and manners: served at / without shadowing the API, the password
asked for and used, agents searched, switched and deleted from the keyboard, and axe-core's
WCAG A/AA checks on every view."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from fake_script import Script
from patience import ANSWERS
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from test_server_support import Server, settings_for
from test_web_page import new_agent, open_agent, send
from test_web_support import axe_violations, browser, fake, page, screenshot, script, server  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def guarded(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("guarded") / "stateloop.db"
    with Server(settings_for(fake, db, server_password="s3cret")) as running:
        yield running


def test_the_page_is_open_and_the_api_is_not(guarded: Server) -> None:
    page = httpx.get(guarded.url + "/", timeout=30)  # the first request of a new server
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'src="/ui/app.js"' in page.text
    script = httpx.get(guarded.url + "/ui/app.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert httpx.get(guarded.url + "/ui/style.css").headers["content-type"].startswith("text/css")
    for missing in ("/ui/nothing.js", "/ui/index.html", "/ui/..%2Fweb%2F__init__.py",
                    "/ui/..%2Fv1%2Fagents"):
        assert httpx.get(guarded.url + missing).status_code == 404, missing
    assert httpx.get(guarded.url + "/v1/agents").status_code == 401
    assert httpx.get(guarded.url + "/openapi.json",
                     headers={"Authorization": "Bearer s3cret"},
                     timeout=60).json()["paths"].get("/") is None  # the document is built here


def test_login_with_the_server_password(browser: Any, guarded: Server) -> None:
    httpx.post(f"{guarded.url}/v1/agents", headers={"Authorization": "Bearer s3cret"},
               json={"name": "private", "model": "openai/gpt-4o-mini"}).raise_for_status()
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.goto(guarded.url)
    password = page.get_by_label("Server password")
    expect(password).to_be_focused()
    assert axe_violations(page) == []
    screenshot(page, "login")
    password.fill("wrong")
    password.press("Enter")
    expect(page.get_by_role("status")).to_have_text("This server needs its password.")
    page.get_by_label("Server password").fill("s3cret")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name=re.compile("private"))).to_be_visible()
    expect(page.get_by_label("Server password")).to_be_hidden()
    # an upload goes another way (XMLHttpRequest, for its progress) with the password too
    sent: list[str | None] = []
    page.on("request", lambda r: sent.append(r.headers.get("authorization"))
            if r.url.endswith("/upload") else None)
    page.get_by_role("button", name=re.compile("private")).click()
    page.get_by_role("tab", name="Files").click()
    page.get_by_label("New folder").fill("private-notes")
    page.get_by_role("button", name="Make folder").click()
    folder = page.get_by_role("region", name="Folder private-notes")
    folder.get_by_label("File to upload").set_input_files(
        files=[{"name": "a.txt", "mimeType": "text/plain", "buffer": b"kept private"}])
    folder.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Uploaded a.txt to private-notes")
    assert sent == ["Bearer s3cret"]
    context.close()


def test_search_switch_and_delete_agents_from_the_keyboard(page: Any, server: Server) -> None:
    first, second = new_agent(server, "alpha-one"), new_agent(server, "beta-two")
    page.reload()
    agents = page.get_by_role("navigation", name="Agents").get_by_role(
        "button", name=re.compile("alpha-one|beta-two"))
    expect(agents).to_have_count(2)  # what a user sees before searching: the agents listed
    page.keyboard.press("/")
    expect(page.get_by_label("Search agents")).to_be_focused()
    page.keyboard.type("beta")
    expect(agents).to_have_count(1)
    expect(page.get_by_label("Search agents")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")  # past "New agent" to the one match
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="beta-two")).to_be_visible()
    page.keyboard.press("Alt+2")
    expect(page.get_by_role("tab", name="Memory")).to_have_attribute("aria-selected", "true")
    page.get_by_role("tab", name="Memory").focus()
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("tab", name="Context")).to_be_focused()

    page.get_by_label("Search agents").fill("")
    page.get_by_role("button", name=re.compile("alpha-one")).click()
    expect(page.get_by_role("heading", name="alpha-one")).to_be_visible()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete agent").click()
    expect(page.get_by_role("status")).to_have_text("Deleted alpha-one")
    assert httpx.get(f"{server.url}/v1/agents/{first['id']}", timeout=ANSWERS).status_code == 404
    expect(page.get_by_role("button", name=re.compile("alpha-one"))).to_have_count(0)
    assert httpx.get(f"{server.url}/v1/agents/{second['id']}",
                     timeout=ANSWERS).status_code == 200


def test_every_view_passes_axe(page: Any, script: Script, server: Server) -> None:
    agent = new_agent(server, "accessible", tools=["shout"], tool_rules=[
        {"type": "requires_approval", "tool_name": "shout"}])
    open_agent(page, agent)
    script.set(call("shout", text="a"), reply("ok"))
    send(page, "Shout a")
    expect(page.get_by_role("button", name="Approve")).to_be_focused()
    found = {"chat": axe_violations(page)}
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_text(re.compile("stopped: end_turn"))).to_be_visible()
    for tab in ("Memory", "Context", "Runs", "Tools"):
        page.get_by_role("tab", name=tab).click()
        expect(page.get_by_role("tabpanel")).not_to_be_empty()
        if tab == "Context":
            page.get_by_role("button", name="Show the messages in context").click()
        if tab in ("Runs", "Tools"):
            page.locator("#panel details summary").first.click()
            expect(page.locator("#panel details").first).not_to_contain_text("Loading")
        found[tab.lower()] = axe_violations(page)
    page.keyboard.press("n")
    expect(page.get_by_role("dialog")).to_be_visible()
    found["create"] = axe_violations(page)
    assert {view: v for view, v in found.items() if v} == {}
    # the checker sees what it should: an unlabelled field, faint text
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_be_hidden()
    page.evaluate("""document.body.append(
        Object.assign(document.createElement('input'), {id: 'bare'}),
        Object.assign(document.createElement('p'), {textContent: 'faint', style: 'color:#ccc'}))""")
    assert {v["id"] for v in axe_violations(page)} >= {"label", "color-contrast"}


def test_screenshots_land_under_test_output() -> None:
    from test_web_support import SCREENS

    assert SCREENS.parts[-2:] == ("test-output", "screens")
    assert Path(SCREENS.parent.parent / ".gitignore").read_text().count("test-output/") == 1
