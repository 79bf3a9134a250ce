"""The web page's views beyond the conversation, driven in headless Chromium as a user would
against a real server on loopback: folders and files (an upload with its progress and parsing
state, attached), MCP servers (tested, added, a tool attached), conversations (started,
written to, forked, deleted), groups (made, sent to) and identities (made, attached); each
checked by axe-core and photographed."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from fake_script import Script
from mcp_support import http_demo
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from test_server_support import Server, settings_for
from test_web_page import new_agent, open_agent, send
from test_web_support import axe_violations, browser, fake, page, screenshot, script  # noqa: F401


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server that may reach an MCP server on loopback (the demo one)."""
    db = tmp_path_factory.mktemp("web-views") / "stateloop.db"
    with Server(settings_for(fake, db, mcp_private_urls=True)) as running:
        yield running


def test_upload_a_file_see_it_parsed_and_attach_its_folder(page: Any, server: Server) -> None:
    agent = new_agent(server, "views-files")
    open_agent(page, agent, "Files")
    page.get_by_label("New folder").fill("field-notes")
    page.get_by_role("button", name="Make folder").click()
    folder = page.get_by_role("region", name="Folder field-notes")
    text = "\n".join(f"Line {n}: the heron came back to the pond." for n in range(2000))
    folder.get_by_label("File to upload").set_input_files(
        files=[{"name": "heron.txt", "mimeType": "text/plain", "buffer": text.encode()}])
    folder.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Uploaded heron.txt to field-notes")
    expect(folder.get_by_role("progressbar")).to_have_attribute("value", "1")
    row = folder.locator("li.file", has_text="heron.txt")
    expect(row).to_have_attribute("data-status", "completed")
    expect(row).to_contain_text(re.compile(r"completed · \d+ chunks"))

    folder.get_by_label("File to upload").set_input_files(
        files=[{"name": "empty.txt", "mimeType": "text/plain", "buffer": b""}])
    folder.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("422")

    folder.get_by_role("button", name="Attach field-notes").click()
    expect(page.get_by_role("region", name="Folder field-notes")).to_contain_text("attached")
    attached = httpx.get(f"{server.url}/v1/agents/{agent['id']}/folders").json()
    assert [f["name"] for f in attached] == ["field-notes"]
    assert axe_violations(page) == []
    screenshot(page, "files")


def test_test_add_an_mcp_server_and_attach_one_of_its_tools(page: Any, server: Server) -> None:
    agent = new_agent(server, "views-mcp")
    open_agent(page, agent, "MCP")
    form = page.get_by_role("form", name="Add an MCP server")
    form.get_by_label("Name").fill("demo")
    form.get_by_label("URL or command").fill("ftp://nowhere")
    form.get_by_role("button", name="Test").click()
    expect(form.get_by_label("URL or command")).to_have_attribute("aria-invalid", "true")
    expect(form.locator("#mcp-where-error")).not_to_be_empty()
    with http_demo() as url:
        form.get_by_label("URL or command").fill(url)
        form.get_by_role("button", name="Test").click()
        expect(form.locator("#mcp-tested")).to_contain_text(re.compile(r"Connected: \d+ tools"))
        expect(form.get_by_role("list", name="Tools found by the test")).to_contain_text("add")
        assert httpx.get(f"{server.url}/v1/mcp-servers").json() == []  # a test stores nothing
        form.get_by_role("button", name="Add server").click()
        expect(page.get_by_role("status")).to_have_text("Added demo")
        card = page.get_by_role("region", name="MCP server demo")
        card.get_by_role("button", name="List tools of demo").click()
        tools = card.get_by_role("list", name="Tools of demo")
        tools.get_by_role("button", name="Attach add", exact=True).click()
        expect(page.get_by_role("status")).to_have_text("Attached add")
        assert "add" in [t["name"] for t in
                         httpx.get(f"{server.url}/v1/agents/{agent['id']}/tools").json()]
        assert axe_violations(page) == []
        screenshot(page, "mcp")


def test_start_talk_in_fork_and_delete_a_conversation(page: Any, script: Script,
                                                      server: Server) -> None:
    agent = new_agent(server, "views-threads", tools=["core_memory_append"], tool_rules=[
        {"type": "requires_approval", "tool_name": "core_memory_append"}])
    open_agent(page, agent)
    script.set(reply("Own history answer."))
    send(page, "In the agent's own history")
    log = page.get_by_role("log", name="Conversation")
    expect(log.get_by_role("article", name="Assistant")).to_contain_text("Own history answer.")

    page.get_by_role("tab", name="Conversations").click()
    page.get_by_role("button", name="Start a conversation").click()
    listed = page.get_by_role("list", name="Conversations").locator("li")
    expect(listed).to_have_count(1)
    first = httpx.get(f"{server.url}/v1/conversations",
                      params={"agent_id": agent["id"]}).json()[0]["id"]
    page.get_by_role("button", name=f"Open {first} in the chat").click()
    expect(page.get_by_role("tab", name="Chat")).to_have_attribute("aria-selected", "true")
    expect(page.get_by_label("Thread")).to_have_value(first)
    expect(log).not_to_contain_text("Own history answer.")  # a thread of its own
    script.set(reply("Hello from the thread."))
    with page.expect_response(re.compile(f"/v1/conversations/{first}/messages$")) as streamed:
        send(page, "Hi thread")
    assert streamed.value.headers["content-type"].startswith("text/event-stream")
    expect(log.get_by_role("article", name="Assistant")).to_contain_text("Hello from the thread.")
    expect(log.get_by_text(re.compile("stopped: end_turn"))).to_have_count(1)
    # a call in the thread waits for approval, answered in the thread
    script.set(call("core_memory_append", label="human", content="Thread fact."), reply("Kept."))
    send(page, "Remember a thread fact")
    card = log.get_by_role("article", name="Approval requested: core_memory_append")
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    page.reload()  # what waits is offered again from the thread's stored history
    page.get_by_label("Thread").select_option(first)
    card.get_by_role("button", name="Approve").click()
    expect(card).to_contain_text("Result (success)")
    expect(log.get_by_role("article", name="Assistant").last).to_contain_text("Kept.")
    side = page.get_by_role("complementary", name="The agent at a glance")
    expect(side.get_by_role("article", name="Block human")).to_contain_text("Thread fact.")
    page.reload()  # the thread is the agent's own again; the conversation's stays stored
    page.get_by_label("Thread").select_option(first)
    expect(log.get_by_role("article", name="You").first).to_have_text(re.compile("Hi thread"))
    expect(log.locator("p.note.stop")).to_have_count(3)
    expect(log.get_by_text("Approved")).to_have_count(1)

    page.get_by_role("tab", name="Conversations").click()
    page.get_by_role("button", name=f"Fork {first}").click()
    expect(page.get_by_role("status")).to_contain_text(f"Forked {first} as ")
    expect(listed).to_have_count(2)
    fork = page.get_by_role("status").inner_text().rsplit(" ", 1)[1]
    page.get_by_role("button", name=f"Open {fork} in the chat").click()
    expect(log.get_by_role("article", name="Assistant").first).to_contain_text(
        "Hello from the thread.")
    page.get_by_role("tab", name="Conversations").click()
    assert axe_violations(page) == []
    screenshot(page, "conversations")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Delete {fork}").click()
    expect(listed).to_have_count(1)
    left = httpx.get(f"{server.url}/v1/conversations", params={"agent_id": agent["id"]}).json()
    assert [c["id"] for c in left] == [first]


def test_make_a_group_send_to_it_and_attach_an_identity(page: Any, script: Script,
                                                        server: Server) -> None:
    agent, other = new_agent(server, "views-lead"), new_agent(server, "views-mate")
    open_agent(page, agent, "Groups")
    expect(page.get_by_text("This agent is in no group")).to_be_visible()
    page.get_by_label("Description").fill("pair")
    page.get_by_label(re.compile("^views-mate")).check()
    page.get_by_role("button", name="Make group").click()
    card = page.get_by_role("region", name=re.compile("^Group "))
    expect(card).to_contain_text("Members: views-lead (this agent), views-mate")
    script.set(reply("Lead here."), reply("Mate here."))
    card.get_by_label("Message to the group").fill("Roll call")
    card.get_by_role("button", name="Send to group").click()
    answers = card.get_by_role("list", name=re.compile("^Answers in"))
    expect(answers).to_contain_text("views-lead (this agent): Lead here.")
    expect(answers).to_contain_text(re.compile(r"views-mate \(…\w{8}\): Mate here\."))
    assert axe_violations(page) == []
    screenshot(page, "groups")

    page.get_by_role("tab", name="Identities").click()
    page.get_by_label("Identifier key").fill("user-ada")
    page.get_by_label("Name", exact=True).fill("Ada")
    page.get_by_role("button", name="Make identity").click()
    page.get_by_role("button", name="Attach Ada").click()
    expect(page.get_by_role("status")).to_have_text("Attached Ada")
    expect(page.get_by_role("list", name="Identities")).to_contain_text("attached")
    state = httpx.get(f"{server.url}/v1/agents/{agent['id']}").json()
    assert [i["identifier_key"] for i in state["identities"]] == ["user-ada"] or len(
        state["identity_ids"]) == 1
    assert axe_violations(page) == []
    screenshot(page, "identities")
    groups = httpx.get(f"{server.url}/v1/agents/{other['id']}/groups").json()
    assert [g["description"] for g in groups] == ["pair"]
