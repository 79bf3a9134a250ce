"""What a web page can make a browser send to an open ``stateloop serve`` on loopback: a page
on a rebound DNS name (its own ``Host``), writes from another origin, and forms posted without
a preflight are refused before anything is stored or run; letta-client and the server's own
page keep working, and no other site may frame the page. Real server, real Chromium."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from letta_client import Letta

from af_support import minimal_file
from test_cli_support import Cli, base_env, serving

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
EVIL = "evil.example"  # Chromium resolves it to 127.0.0.1: a DNS answer rebound to loopback
PLANT = "def planted() -> str:\n    \"\"\"Planted.\"\"\"\n    return 'pwned'\n"


def agent_file(name: str) -> bytes:
    """An Agent File that would store an agent ``name`` and a tool ``planted``."""
    tool = {"id": "tool-0", "name": "planted", "tool_type": "custom", "source_code": PLANT,
            "json_schema": {"name": "planted", "description": "Planted.",
                            "parameters": {"type": "object", "properties": {}}}}
    return json.dumps({**minimal_file(name=name, tool_ids=["tool-0"]), "tools": [tool]}).encode()


class Served:
    def __init__(self, url: str, marker: Path) -> None:
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])
        self.marker = marker  # what a planted MCP server's command would create

    def names(self) -> list[str]:
        return sorted(a["name"] for a in httpx.get(f"{self.url}/v1/agents").json())

    def tools(self) -> list[str]:
        return sorted(t["name"] for t in httpx.get(f"{self.url}/v1/tools").json())

    def mcp_servers(self) -> list[str]:
        return [s["server_name"] for s in httpx.get(f"{self.url}/v1/mcp-servers").json()]

    def nothing_planted(self) -> None:
        assert not any(name.startswith("planted") for name in self.names()), self.names()
        assert "planted" not in self.tools()
        assert self.mcp_servers() == [] and not self.marker.exists()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``stateloop serve`` as a user runs it: loopback, no password."""
    home = tmp_path_factory.mktemp("browsers")
    env = {**base_env(home), "STATELOOP_DATABASE_URL": f"sqlite:///{home / 'agents.db'}",
           "OPENAI_API_KEY": "unused", "STATELOOP_MCP_STDIO_COMMANDS": "/bin/sh"}
    with serving(Cli(env, home / "agents.db")) as url:
        yield Served(url, home / "mcp-ran")


def mcp_command(served: Served) -> dict[str, Any]:
    return {"server_name": "planted", "config": {
        "mcp_server_type": "stdio", "command": "/bin/sh",
        "args": ["-c", f"touch {served.marker}"]}}


def test_a_rebound_host_is_refused_and_the_served_names_answer(served: Served) -> None:
    port = served.port
    for method, path, body in (("GET", "/v1/agents", None),
                               ("POST", "/v1/mcp-servers", mcp_command(served)),
                               ("GET", "/", None)):
        refused = httpx.request(method, served.url + path, json=body,
                                headers={"Host": f"{EVIL}:{port}"})
        assert refused.status_code == 400, refused.text
        detail = refused.json()["detail"]
        assert f"Host '{EVIL}:{port}' is not an address of this server" in detail
        assert f"127.0.0.1:{port}" in detail and "STATELOOP_ALLOWED_HOSTS" in detail
    # The port is part of the name; no Host at all is no name either.
    for host in (f"127.0.0.1:{port + 1}", f"localhost.{EVIL}:{port}", ""):
        assert httpx.get(served.url + "/v1/agents", headers={"Host": host}).status_code == 400
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}",
                 f"[::1]:{port}"):
        assert httpx.get(served.url + "/v1/agents", headers={"Host": host}).status_code == 200
    # Health says nothing and stays open to probes under any name.
    assert httpx.get(served.url + "/v1/health", headers={"Host": EVIL}).status_code == 200
    served.nothing_planted()


def test_a_proxy_name_is_accepted_once_configured(tmp_path: Path) -> None:
    env = {**base_env(tmp_path), "STATELOOP_DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}",
           "STATELOOP_ALLOWED_HOSTS": "agents.example, proxy.example:8443"}
    with serving(Cli(env, tmp_path / "a.db")) as url:
        def status(host: str, **headers: str) -> int:
            return httpx.post(url + "/v1/blocks", json={"label": "k", "value": "v"},
                              headers={"Host": host, **headers}).status_code
        assert status("agents.example") == 200 and status("agents.example:444") == 200
        assert status("proxy.example:8443") == 200 and status("proxy.example") == 400
        assert status(f"{EVIL}:8443") == 400
        # The page as the proxy serves it: its origin is the public name, its Host not.
        assert status(url.removeprefix("http://"), Origin="https://agents.example") == 200
        assert status(url.removeprefix("http://"), Origin=f"https://{EVIL}") == 403


def test_every_interface_answers_any_name_behind_its_password(tmp_path: Path) -> None:
    env = {**base_env(tmp_path), "STATELOOP_DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}",
           "STATELOOP_SERVER_PASSWORD": "s3cret"}
    key = {"Authorization": "Bearer s3cret"}
    with serving(Cli(env, tmp_path / "a.db"), "--host", "0.0.0.0") as url:
        # A rebound page does not have the password, and the machine has names of its own.
        assert httpx.get(url + "/v1/agents", headers={"Host": EVIL}).status_code == 401
        assert httpx.get(url + "/v1/agents", headers={"Host": EVIL, **key}).status_code == 200
    env["STATELOOP_ALLOWED_HOSTS"] = "agents.example"
    with serving(Cli(env, tmp_path / "a.db"), "--host", "0.0.0.0") as url:
        port = url.rsplit(":", 1)[1]
        for host, status in (("agents.example", 200), (f"localhost:{port}", 200),
                             (f"127.0.0.1:{port}", 200), (EVIL, 400)):
            answer = httpx.get(url + "/v1/agents", headers={"Host": host, **key})
            assert answer.status_code == status, (host, answer.text)


def test_a_cross_origin_import_is_refused_and_stores_nothing(served: Served) -> None:
    before = served.names()
    for origin, site in ((f"http://{EVIL}", "cross-site"), ("http://127.0.0.1:1", "same-site"),
                         ("null", "cross-site")):
        refused = httpx.post(served.url + "/v1/agents/import",
                             headers={"Origin": origin, "Sec-Fetch-Site": site},
                             files={"file": ("agent.af", agent_file("planted"))})
        assert refused.status_code == 403, refused.text
        assert f"from the page of another origin ('{origin}')" in refused.json()["detail"]
    # A browser that sends Sec-Fetch-Site but (oddly) no Origin is refused on it.
    refused = httpx.delete(f"{served.url}/v1/agents/x", headers={"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403 and "Sec-Fetch-Site" in refused.json()["detail"]
    assert served.names() == before
    served.nothing_planted()


def test_a_form_post_without_a_client_header_is_refused(served: Served) -> None:
    before = served.names()
    refused = httpx.post(served.url + "/v1/agents/import",
                         files={"file": ("agent.af", agent_file("planted"))})
    assert refused.status_code == 403, refused.text
    assert "X-Requested-With" in refused.json()["detail"]
    # text/plain and urlencoded are the other bodies any page may post unasked.
    body = json.dumps({"name": "planted-text", "model": "openai/gpt-4o-mini"})
    for kind in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded"):
        assert httpx.post(served.url + "/v1/agents", content=body,
                          headers={"Content-Type": kind}).status_code == 403
    served.nothing_planted()
    # The same upload with a header no page can add unasked is a client's, and is taken.
    taken = httpx.post(served.url + "/v1/agents/import", headers={"X-Requested-With": "curl"},
                       data={"append_copy_suffix": "false"},
                       files={"file": ("agent.af", agent_file("by-hand"))})
    assert taken.status_code == 200, taken.text
    assert served.names() == sorted([*before, "by-hand"]) and "planted" in served.tools()
    httpx.delete(f"{served.url}/v1/agents/{taken.json()['agent_ids'][0]}").raise_for_status()
    for tool in httpx.get(f"{served.url}/v1/tools", params={"name": "planted"}).json():
        httpx.delete(f"{served.url}/v1/tools/{tool['id']}").raise_for_status()


def test_letta_client_imports_and_uploads(served: Served) -> None:
    client = Letta(base_url=served.url, max_retries=0, timeout=60)
    [agent_id] = client.agents.import_file(file=("agent.af", agent_file("imported")),
                                           append_copy_suffix=False).agent_ids
    assert client.agents.retrieve(agent_id).name == "imported"
    folder = client.folders.create(name="notes", embedding="minilm")
    file = client.folders.files.upload(folder.id, file=("notes.txt", b"Ada likes tea.\n"))
    assert file.processing_status in ("pending", "completed")
    client.folders.delete(folder.id)
    client.agents.delete(agent_id)
    for tool in client.tools.list(name="planted"):
        client.tools.delete(tool.id)


def test_the_page_and_its_files_may_not_be_framed(served: Served) -> None:
    for path in ("/", "/ui/app.js", "/ui/style.css"):
        headers = httpx.get(served.url + path).headers
        assert headers["x-frame-options"] == "DENY", path
        assert "frame-ancestors 'none'" in headers["content-security-policy"], path
        assert headers["x-content-type-options"] == "nosniff", path


# A real browser: the attacks as pages make them, from origins of their own.

@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"no Chromium at {CHROMIUM}: .ci/run installs Debian's chromium")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", f"--host-resolver-rules=MAP {EVIL} 127.0.0.1"])
        yield browser
        browser.close()


class _Attacker(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        page = b"<!doctype html><title>attacker</title><h1>nothing to see</h1>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def attacker() -> Iterator[int]:
    """Another site's page: a server of its own on a second loopback port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(5)


ATTACK = """async ([target, file, body]) => {
  const out = {};
  async function attempt(key, url, options) {
    try { const r = await fetch(url, options); out[key] = r.type === "opaque" ? "sent" : r.status; }
    catch (e) { out[key] = "blocked"; }
  }
  const form = new FormData();
  form.append("file", new Blob([file], {type: "application/json"}), "agent.af");
  form.append("append_copy_suffix", "false");
  await attempt("multipart", target + "/v1/agents/import",
                {method: "POST", mode: "no-cors", body: form});
  await attempt("text", target + "/v1/agents", {method: "POST", mode: "no-cors",
                headers: {"Content-Type": "text/plain"}, body});
  await attempt("untyped", target + "/v1/agents",
                {method: "POST", mode: "no-cors", body: new Blob([body])});
  await attempt("json", target + "/v1/agents",
                {method: "POST", headers: {"Content-Type": "application/json"}, body});
  await attempt("delete", target + "/v1/agents/agent-x", {method: "DELETE"});
  return out;
}"""


def attack(browser: Any, origin: str, served: Served) -> tuple[dict[str, Any], dict[str, int]]:
    """The requests a page at ``origin`` makes, as its script saw them, and the statuses the
    server answered (the browser hides those of no-cors requests from the script)."""
    context = browser.new_context()
    page = context.new_page()
    answered: dict[str, int] = {}

    def heard(response: Any) -> None:
        if "/v1/" in response.url:
            answered[f"{response.request.method} {response.url.split('/v1/', 1)[1]}"] = (
                response.status)

    page.on("response", heard)
    page.goto(origin + "/")
    body = json.dumps({"name": "planted-json", "model": "openai/gpt-4o-mini"})
    sent = page.evaluate(ATTACK, [served.url, agent_file("planted").decode(), body])
    context.close()
    return sent, answered


def test_another_sites_page_cannot_write_through_the_browser(browser: Any, served: Served,
                                                             attacker: int) -> None:
    for origin in (f"http://{EVIL}:{attacker}", f"http://127.0.0.1:{attacker}"):
        sent, answered = attack(browser, origin, served)
        # The simple requests reach the server, which refuses them; the others die at the
        # preflight (this server grants none).
        assert sent == {"multipart": "sent", "text": "sent", "untyped": "sent",
                        "json": "blocked", "delete": "blocked"}, (origin, sent)
        assert answered.get("POST agents/import") == 403, (origin, answered)
        assert answered.get("POST agents") == 403, (origin, answered)
        served.nothing_planted()


def test_a_page_on_a_rebound_name_reaches_nothing(browser: Any, served: Served) -> None:
    context = browser.new_context()
    page = context.new_page()
    rebound = f"http://{EVIL}:{served.port}"
    answer = page.goto(rebound + "/")
    assert answer is not None and answer.status == 400
    # Its requests are same-origin now: the browser lets it read and write, the server not.
    result = page.evaluate("""async (body) => {
      const write = await fetch("/v1/mcp-servers", {method: "POST", body,
                                headers: {"Content-Type": "application/json"}});
      const read = await fetch("/v1/agents");
      return [write.status, read.status, await read.text()];
    }""", json.dumps(mcp_command(served)))
    assert result[:2] == [400, 400] and "not an address of this server" in result[2], result
    context.close()
    served.nothing_planted()


def test_the_servers_own_page_works_and_no_other_site_frames_it(
        browser: Any, served: Served, attacker: int) -> None:
    context = browser.new_context()
    page = context.new_page()
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text)
            if "Content Security Policy" in m.text else None)
    page.goto(served.url + "/")
    page.keyboard.press("n")
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Name").fill("from-the-page")
    dialog.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="from-the-page")).to_be_visible()
    agent_id = page.evaluate("location.hash").lstrip("#")
    assert httpx.get(f"{served.url}/v1/agents/{agent_id}").json()["name"] == "from-the-page"
    page.get_by_role("tab", name="Context").click()  # its bars are sized by style attributes
    expect(page.get_by_role("tabpanel")).to_contain_text("tokens")
    assert blocked == []
    httpx.delete(f"{served.url}/v1/agents/{agent_id}").raise_for_status()

    page.goto(f"http://127.0.0.1:{attacker}/")
    page.evaluate("""(url) => new Promise((done) => {
      const frame = document.createElement("iframe");
      frame.src = url; frame.onload = done; document.body.append(frame);
    })""", served.url + "/")
    [framed] = [frame for frame in page.frames if frame != page.main_frame]
    assert "stateloop" not in framed.content()
    context.close()
