"""Shared harness for the web page's tests: the server on loopback with the fake model and
an in-process tool, Debian's Chromium driven by Playwright, screenshots under
``test-output/screens/`` and axe-core (bundled by axe-playwright-python) run in the page."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_script import Script
from patience import ANSWERS
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.tools import tool
from test_server_support import Server, settings_for

playwright = pytest.importorskip("playwright.sync_api")

SCREENS = Path(__file__).resolve().parent.parent / "test-output" / "screens"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@tool
def shout(text: str) -> str:
    """Repeat the text in capitals.

    Args:
        text: What to repeat.
    """
    return text.upper()


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def fake(script: Script) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(script, chunk_size=4) as server:
        yield server


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("web") / "stateloop.db"
    with Server(settings_for(fake, db), tools=(shout,)) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"no Chromium at {CHROMIUM}: .ci/run installs Debian's chromium")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any, server: Server, script: Script) -> Iterator[Any]:
    """A fresh page on the server, failing the test on any error the page's scripts throw
    or any request it makes elsewhere than the server."""
    script.set()
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.set_default_timeout(ANSWERS * 1000)  # a hang guard: what a user waits for is
    playwright.expect.set_options(timeout=ANSWERS * 1000)  # asserted in each test
    errors: list[str] = []
    elsewhere: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: None if request.url.startswith(server.url + "/")
            else elsewhere.append(request.url))
    page.goto(server.url)
    yield page
    context.close()
    assert errors == []
    assert elsewhere == []


def screenshot(page: Any, name: str) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / f"{name}.png"))


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's WCAG A/AA violations on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options={"runOnly": ["wcag2a", "wcag2aa"]})
    return [{"id": v["id"], "nodes": [n["target"] for n in v["nodes"]]}
            for v in results.response["violations"]]
