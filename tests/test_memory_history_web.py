"""The web page shows a block's history: its commits, the diff each made, and a revert
that is itself a commit and changes the block (headless Chromium, axe-core's checks)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, settings_for

# The web support's fixtures, taken into this module only: registered as a plugin, its
# `server` (with an in-process tool) would stand in for other modules' servers.
from test_web_support import axe_violations, browser, fake, page, screenshot, script  # noqa: F401


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The server without the support's in-process tool: its name is process-wide, and
    later test files create a tool of that name."""
    db = tmp_path_factory.mktemp("web-history") / "stateloop.db"
    with Server(settings_for(fake, db)) as running:
        yield running


def test_a_blocks_history_shows_diffs_and_reverts(page: Any, server: Server) -> None:
    made = httpx.post(f"{server.url}/v1/agents", timeout=30, json={
        "name": "historian", "model": "openai/gpt-4o-mini", "include_base_tools": False,
        "memory_blocks": [{"label": "human", "value": "Name: Ada", "limit": 500}]})
    made.raise_for_status()
    agent = made.json()
    httpx.patch(f"{server.url}/v1/agents/{agent['id']}/core-memory/blocks/human", timeout=30,
                json={"value": "Name: Grace"}).raise_for_status()
    page.reload()
    page.get_by_role("button", name=re.compile("historian")).click()
    page.get_by_role("tab", name="Memory").click()
    page.get_by_text("History of human").click()
    entries = page.locator("ol.history li")
    expect(entries).to_have_count(2)
    expect(entries.first).to_contain_text("Update human")
    expect(entries.nth(1)).to_contain_text("Create agent")
    entries.first.get_by_role("button", name=re.compile("Diff of")).click()
    diff = entries.first.locator("pre.diff")
    expect(diff).to_contain_text("-Name: Ada")
    expect(diff).to_contain_text("+Name: Grace")
    assert axe_violations(page) == []
    screenshot(page, "memory-history")
    expect(entries.first.get_by_role("button", name=re.compile("Revert"))).to_have_count(0)
    entries.nth(1).get_by_role("button", name=re.compile("Revert human to")).click()
    expect(page.get_by_role("status")).to_contain_text("Reverted human to")
    expect(page.get_by_label("human", exact=True)).to_have_value("Name: Ada")
    commits = httpx.get(f"{server.url}/v1/agents/{agent['id']}/memory/commits",
                        timeout=30).json()
    assert commits[0]["message"].startswith("Revert human to")
