"""The web page's Access view, driven in headless Chromium against a server with a password:
an admin makes a read key (its secret shown once, copied), the key signs in to a page with
no Access view whose writes show the server's 403, the admin renames and revokes it (the
key's page is refused), makes and deletes a client-side token, reads usage and pages the
audit log; axe-core checks the view and a screenshot is kept."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from fake_script import Script
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply
from test_server_support import Server, settings_for
from test_web_page import send
from test_web_support import axe_violations, browser, fake, screenshot, script  # noqa: F401

PASSWORD = "s3cret"
ADMIN = {"Authorization": f"Bearer {PASSWORD}"}


@pytest.fixture(scope="module")
def guarded(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("web-admin") / "stateloop.db"
    with Server(settings_for(fake, db, server_password=PASSWORD)) as running:
        yield running


@pytest.fixture(scope="module")
def agent(guarded: Server) -> dict[str, Any]:
    made = httpx.post(f"{guarded.url}/v1/agents", headers=ADMIN, timeout=30, json={
        "name": "shared", "model": "openai/gpt-4o-mini", "include_base_tools": False})
    made.raise_for_status()
    return made.json()  # type: ignore[no-any-return]


def signed_in(browser: Any, server: Server, credential: str) -> Any:
    """A new page on the server, signed in with ``credential`` where the page asks."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    page.goto(server.url)
    field = page.get_by_label("Server password or API key")
    expect(field).to_be_focused()
    field.fill(credential)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name=re.compile("shared"))).to_be_visible()
    return page


def open_access(page: Any) -> None:
    page.get_by_role("button", name="Access", exact=True).click()
    expect(page.get_by_role("heading", name="Access", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Audit log")).to_be_visible()


def test_a_read_key_made_in_the_view_signs_in_without_access_and_is_revoked(
        browser: Any, guarded: Server, agent: dict[str, Any]) -> None:
    admin = signed_in(browser, guarded, PASSWORD)
    open_access(admin)
    keys = admin.locator("#access-keys")
    expect(keys).to_contain_text("No API keys yet")
    form = admin.get_by_role("form", name="Make an API key")
    form.get_by_label("Name").fill("reader")
    form.get_by_label("Role").select_option("read")
    form.get_by_role("button", name="Make key").click()
    shown = admin.get_by_role("textbox", name=re.compile("The new key reader"))
    expect(shown).to_have_value(re.compile(r"^sk-sl-\w+\.\S+$"))
    secret = shown.input_value()
    admin.get_by_role("button", name="Copy", exact=True).click()
    expect(admin.get_by_role("status")).to_have_text("Copied the key reader")
    assert admin.evaluate("navigator.clipboard.readText()") == secret
    row = keys.locator("tr", has=admin.get_by_role("rowheader", name="reader"))
    expect(row).to_contain_text("default")
    expect(row).to_contain_text("read")
    assert axe_violations(admin) == []
    screenshot(admin, "access")
    admin.get_by_role("button", name="Done").click()
    open_access(admin)  # drawn again: the secret is nowhere on the page
    expect(row).to_be_visible()
    assert secret not in admin.content()
    listed = httpx.get(f"{guarded.url}/v1/api-keys", headers=ADMIN).json()
    assert [(k["name"], k["role"], k["revoked_at"]) for k in listed] == [("reader", "read", None)]
    key_id = listed[0]["id"]

    reader = signed_in(browser, guarded, secret)
    expect(reader.get_by_role("button", name="Access", exact=True)).to_be_hidden()
    reader.get_by_role("button", name=re.compile("shared")).click()
    expect(reader.get_by_role("heading", name="shared")).to_be_visible()
    reader.once("dialog", lambda dialog: dialog.accept())
    reader.get_by_role("button", name="Delete agent").click()
    expect(reader.get_by_role("status")).to_have_text(re.compile(r"^403: .*read"))
    expect(reader.get_by_role("heading", name="shared")).to_be_visible()
    send(reader, "hello")  # refused where it was sent, in the conversation
    expect(reader.locator("#panel .note.error")).to_have_text(re.compile(r"^403: .*read"))
    assert httpx.get(f"{guarded.url}/v1/agents/{agent['id']}", headers=ADMIN).status_code == 200
    stored = httpx.get(f"{guarded.url}/v1/agents/{agent['id']}/messages", headers=ADMIN).json()
    assert [m for m in stored if m["message_type"] == "user_message"] == []

    admin.once("dialog", lambda dialog: dialog.accept("dashboard reader"))
    admin.get_by_role("button", name="Rename reader").click()
    expect(admin.get_by_role("status")).to_have_text("Renamed reader to dashboard reader")
    admin.once("dialog", lambda dialog: dialog.accept())
    admin.get_by_role("button", name="Revoke dashboard reader").click()
    expect(admin.get_by_role("status")).to_have_text("Revoked dashboard reader")
    revoked = keys.locator("tr", has=admin.get_by_role("rowheader", name="dashboard reader"))
    expect(revoked).to_contain_text("revoked")
    expect(revoked.get_by_role("button", name=re.compile("Revoke"))).to_have_count(0)

    reader.reload()  # the key's page is refused, and says why
    expect(reader.get_by_label("Server password or API key")).to_be_visible()
    expect(reader.get_by_role("status")).to_have_text(re.compile(r"^401: .*was revoked"))

    audit = admin.locator("#access-audit")
    made = audit.locator("tr", has_text="/v1/api-keys").filter(has_text="POST")
    expect(made.first).to_contain_text("server-password")
    expect(made.first).to_contain_text("201")
    admin.get_by_label("Credential").fill(f"key-{key_id}")
    admin.get_by_role("button", name="Show").click()
    expect(audit.locator("caption")).to_have_text(f"Writes by key-{key_id}, newest first")
    entries = audit.locator("tbody tr")  # the refused send and delete, and nothing else
    expect(entries).to_have_count(2)
    base = f"/v1/agents/{agent['id']}"
    for entry, method, path in ((entries.first, "POST", f"{base}/messages/stream"),
                                (entries.last, "DELETE", base)):
        expect(entry.locator("td").nth(2)).to_have_text(method)
        expect(entry.locator("td").nth(3)).to_have_text(path)
        expect(entry.locator("td").nth(4)).to_have_text("403")
    assert admin.errors == [] and reader.errors == []
    admin.context.close()
    reader.context.close()


def test_tokens_usage_and_older_audit_entries(browser: Any, guarded: Server, script: Script,
                                              agent: dict[str, Any]) -> None:
    script.set(reply("hello"))
    httpx.post(f"{guarded.url}/v1/agents/{agent['id']}/messages", headers=ADMIN, timeout=60,
               json={"messages": [{"role": "user", "content": "hi"}]}).raise_for_status()
    for n in range(55):  # more writes than one page of the audit log
        httpx.patch(f"{guarded.url}/v1/agents/{agent['id']}", headers=ADMIN,
                    json={"description": f"edit {n}"}).raise_for_status()
    admin = signed_in(browser, guarded, PASSWORD)
    open_access(admin)

    form = admin.get_by_role("form", name="Make an API key")  # in a project, expiring
    form.get_by_label("Name").fill("team-a writer")
    form.get_by_label("Project").fill("team-a")
    form.get_by_label("Expires (optional)").fill("2031-05-04T03:02")
    form.get_by_role("button", name="Make key").click()
    shown = admin.get_by_role("textbox", name=re.compile("The new key team-a writer"))
    expect(shown).to_have_value(re.compile(r"^sk-sl-"))
    made = [k for k in httpx.get(f"{guarded.url}/v1/api-keys", headers=ADMIN).json()
            if k["name"] == "team-a writer"]
    assert [(k["project"], k["role"], k["expires_at"][:4]) for k in made] == [
        ("team-a", "write", "2031")]
    row = admin.locator("#access-keys tr", has=admin.get_by_role("rowheader", name="team-a writer"))
    expect(row).to_contain_text("2031")
    expect(row).not_to_contain_text("never")

    usage = admin.locator("#access-usage")
    expect(usage.locator("tbody tr")).to_have_count(1)
    expect(usage.get_by_role("rowheader", name="default")).to_be_visible()
    assert usage.locator("tbody td").last.inner_text() == "1"  # one run counted

    tokens = admin.locator("#access-tokens")
    expect(tokens).to_contain_text("No unexpired tokens.")
    form = admin.get_by_role("form", name="Make a client-side token")
    form.get_by_label("Page origin").fill("https://app.example")
    form.get_by_label("read_agent").check()
    form.get_by_role("button", name="Make token").click()
    shown = admin.get_by_role("textbox", name=re.compile("The new token"))
    expect(shown).to_have_value(re.compile(r"^ck-sl-\w+\.\S+$"))
    token = shown.input_value()
    handle = token.split(".")[0]
    row = tokens.locator("tr", has=admin.get_by_role("rowheader", name=handle))
    expect(row).to_contain_text("https://app.example")
    expect(row).to_contain_text(f"{agent['id']}: read_messages, write_messages, read_agent")
    as_token = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{guarded.url}/v1/agents/{agent['id']}", headers=as_token).status_code == 200
    assert axe_violations(admin) == []
    admin.once("dialog", lambda dialog: dialog.accept())
    admin.get_by_role("button", name=f"Delete {handle}").click()
    expect(admin.get_by_role("status")).to_have_text(f"Deleted {handle}")
    expect(tokens).to_contain_text("No unexpired tokens.")
    assert httpx.get(f"{guarded.url}/v1/agents/{agent['id']}", headers=as_token).status_code == 401

    audit = admin.locator("#access-audit")
    expect(audit.locator("tbody tr")).to_have_count(50)
    expect(audit.locator("tbody tr").first).to_contain_text(  # drawn again after the delete
        f"/v1/client-side-access-tokens/{handle}")
    newest = int(audit.locator("tbody tr").first.get_attribute("data-seq"))
    audit.get_by_role("button", name="Older").click()
    expect(audit.get_by_role("button", name="Newest")).to_be_visible()
    seqs = [int(s) for s in audit.locator("tbody tr").evaluate_all(
        "rows => rows.map((r) => r.dataset.seq)")]
    assert seqs and max(seqs) < newest - 49 and seqs == sorted(seqs, reverse=True)
    audit.get_by_role("button", name="Newest").click()
    expect(audit.locator("tbody tr").first).to_have_attribute("data-seq", str(newest))
    assert admin.errors == []
    admin.context.close()
