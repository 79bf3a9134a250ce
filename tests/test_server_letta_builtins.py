"""Letta's built-in tools (web_search, fetch_webpage, run_code, run_code_with_tools) through
the server with letta-client: listed and created as Letta's, attached by name, and the web
tools called by a scripted model (run_code's calls: test_server_run_code.py). Search services
and web pages are fakes on loopback. Nothing here reaches beyond this machine."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import httpx
import pytest
from letta_client import Letta

from af_support import minimal_file
from builtins_support import (
    Site,
    call_tool,
    html_answer,
    json_answer,
    redirect_to,
    site,  # noqa: F401 (fixtures)
)
from stateloop import addresses
from stateloop.testing.scripted import call, reply
from test_server_support import Script, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

BUILTINS = {"web_search", "fetch_webpage", "run_code", "run_code_with_tools"}


@pytest.fixture(autouse=True)
def no_web_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test configures the web tools itself (they read the environment at each call)."""
    for name in ("EXA_API_KEY", "TAVILY_API_KEY", "STATELOOP_SEARXNG_URL", "STATELOOP_WEB_SEARCH",
                 "STATELOOP_EXA_BASE_URL", "STATELOOP_TAVILY_BASE_URL",
                 "STATELOOP_FETCH_PRIVATE_URLS", "STATELOOP_FETCH_MAX_BYTES",
                 "STATELOOP_WEB_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)




# -- listing, creating, attaching ------------------------------------------------------------

def test_the_tools_list_and_are_created_as_lettas(client: Letta, server: Any) -> None:
    listed = {t.name: t for t in client.tools.list(limit=1000)}
    assert set(listed) >= BUILTINS
    for name in BUILTINS:
        assert listed[name].tool_type == "letta_builtin"
        assert listed[name].json_schema["name"] == name
    assert set(listed["web_search"].json_schema["parameters"]["properties"]) == {
        "query", "num_results", "category", "include_text", "include_domains",
        "exclude_domains", "start_published_date", "end_published_date", "user_location"}
    assert listed["web_search"].json_schema["parameters"]["required"] == ["query"]
    language = listed["run_code"].json_schema["parameters"]["properties"]["language"]
    assert language["enum"] == ["python", "js", "ts", "r", "java"]
    assert listed["fetch_webpage"].json_schema["parameters"]["required"] == ["url"]

    created = httpx.post(f"{server.url}/v1/tools/add-base-tools", timeout=30)
    assert created.status_code == 200
    made = {t["name"]: t for t in created.json()}
    assert set(made) >= BUILTINS
    for name in BUILTINS:  # written anew, the same rows
        assert made[name]["id"] == listed[name].id
        assert made[name]["tool_type"] == "letta_builtin"


@pytest.mark.parametrize(("agent_type", "expected"), [
    ("letta_v1_agent", {"conversation_search", "memory_insert", "memory_replace"}),
    ("memgpt_v2_agent", {"send_message", "conversation_search", "memory_insert",
                         "memory_replace"}),
    ("react_agent", set()),
])
def test_include_base_tools_attaches_lettas_base_tools_and_none_of_these(
        client: Letta, agent_type: str, expected: set[str]) -> None:
    agent = new_agent(client, agent_type=agent_type, include_base_tools=True)
    names = {t.name for t in client.agents.tools.list(agent.id)}
    assert names == expected
    assert not names & BUILTINS


def test_attached_by_name_and_by_id(client: Letta) -> None:
    agent = new_agent(client, tools=["web_search", "fetch_webpage"])
    assert {t.name for t in client.agents.tools.list(agent.id)} == {"web_search",
                                                                  "fetch_webpage"}
    run_code = next(t for t in client.tools.list(name="run_code"))
    client.agents.tools.attach(run_code.id, agent_id=agent.id)
    assert "run_code" in {t.name for t in client.agents.tools.list(agent.id)}


def letta_builtin_entry(index: int, name: str) -> dict[str, Any]:
    """A built-in tool as Letta exports it: its stub source, tool_type letta_builtin."""
    return {"id": f"tool-{index}", "name": name, "tool_type": "letta_builtin",
            "source_code": f"def {name}(code: str) -> str:\n    raise NotImplementedError\n",
            "json_schema": {"name": name, "parameters": {"type": "object", "properties": {}}}}


def test_an_agent_file_using_them_imports_with_them_attached(client: Letta,
                                                             script: Script) -> None:
    data = minimal_file(tool_ids=["tool-0", "tool-1", "tool-2", "tool-3"])
    data["tools"] = [letta_builtin_entry(i, name) for i, name in enumerate(sorted(BUILTINS))]
    agent_id = client.agents.import_file(  # type: ignore[arg-type]
        file=("agent.af", json.dumps(data).encode())).agent_ids[0]
    attached = {t.name: t for t in client.agents.tools.list(agent_id)}
    assert set(attached) == BUILTINS
    assert {t.tool_type for t in attached.values()} == {"letta_builtin"}
    script.set(call("run_code", code="2 + 3", language="python"), reply("done"))
    response = client.agents.messages.create(agent_id, input="go")
    returned = next(m for m in response.messages if m.message_type == "tool_return_message")
    assert json.loads(returned.tool_return)["results"] == ["5"]


# -- web_search ------------------------------------------------------------------------------

EXA_RESULTS = {"results": [
    {"title": "Letta docs", "url": "https://docs.example/letta", "publishedDate": "2025-01-02",
     "author": "Ada", "text": "full text", "highlights": ["Letta agents keep memory."],
     "summary": "About Letta."},
    {"title": "Other", "url": "https://other.example/", "publishedDate": None, "author": None,
     "highlights": [], "summary": ""}]}


def test_web_search_through_exa(client: Letta, script: Script, site: Site,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    site.routes["/search"] = json_answer(EXA_RESULTS)
    monkeypatch.setenv("EXA_API_KEY", "exa-key")
    monkeypatch.setenv("STATELOOP_EXA_BASE_URL", site.url)
    returned = call_tool(client, script, "web_search", query="letta memory", num_results=500,
                         category="research paper", include_domains=["docs.example"])
    assert returned.status == "success"
    assert json.loads(returned.tool_return) == {"query": "letta memory", "results": [
        {"title": "Letta docs", "url": "https://docs.example/letta",
         "published_date": "2025-01-02", "author": "Ada",
         "highlights": ["Letta agents keep memory."], "summary": "About Letta."},
        {"title": "Other", "url": "https://other.example/", "published_date": None,
         "author": None}]}
    sent = site.requests[-1]
    assert sent["headers"]["x-api-key"] == "exa-key"
    body = json.loads(sent["body"])
    assert body["numResults"] == 100  # clamped, as Letta clamps
    assert body["category"] == "research paper" and body["includeDomains"] == ["docs.example"]
    assert body["contents"]["text"] is False


def test_web_search_through_tavily(client: Letta, script: Script, site: Site,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    site.routes["/search"] = json_answer({"results": [
        {"title": "T", "url": "https://t.example/", "content": "snippet", "raw_content": "raw",
         "score": 0.9}]})
    monkeypatch.setenv("TAVILY_API_KEY", "tv-key")
    monkeypatch.setenv("STATELOOP_TAVILY_BASE_URL", site.url)
    returned = call_tool(client, script, "web_search", query="q", include_text=True,
                         category="news")
    assert json.loads(returned.tool_return)["results"] == [
        {"title": "T", "url": "https://t.example/", "published_date": None, "author": None,
         "text": "raw", "highlights": ["snippet"]}]
    sent = site.requests[-1]
    assert sent["headers"]["authorization"] == "Bearer tv-key"
    assert json.loads(sent["body"])["topic"] == "news"


def test_web_search_through_searxng_with_domain_filters(
        client: Letta, script: Script, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    site.routes["/search"] = json_answer({"results": [
        {"title": "Kept", "url": "https://docs.example/a", "content": "c1",
         "publishedDate": "2024-05-01"},
        {"title": "Excluded", "url": "https://spam.docs.example/b", "content": "c2"},
        {"title": "Elsewhere", "url": "https://elsewhere.example/", "content": "c3"}]})
    monkeypatch.setenv("STATELOOP_SEARXNG_URL", site.url + "/")
    monkeypatch.setenv("EXA_API_KEY", "unused")  # STATELOOP_WEB_SEARCH chooses
    monkeypatch.setenv("STATELOOP_WEB_SEARCH", "searxng")
    returned = call_tool(client, script, "web_search", query="docs",
                         include_domains=["docs.example"], exclude_domains=["spam.docs.example"])
    assert [r["title"] for r in json.loads(returned.tool_return)["results"]] == ["Kept"]
    assert site.requests[-1]["method"] == "GET" and "format=json" in site.requests[-1]["query"]


def test_web_search_unconfigured_tells_what_to_set(client: Letta, script: Script) -> None:
    returned = call_tool(client, script, "web_search", query="anything")
    assert returned.status == "error"
    for setting in ("EXA_API_KEY", "TAVILY_API_KEY", "STATELOOP_SEARXNG_URL"):
        assert setting in returned.tool_return


def test_web_search_that_gets_no_answer_ends_at_its_deadline(
        client: Letta, script: Script, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    released = threading.Event()

    def never(request: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        released.wait(60)
        return 200, {}, b"{}"

    site.routes["/search"] = never
    monkeypatch.setenv("STATELOOP_SEARXNG_URL", site.url)
    monkeypatch.setenv("STATELOOP_WEB_TIMEOUT", "1.5")
    start = time.monotonic()
    try:
        returned = call_tool(client, script, "web_search", query="slow")
    finally:
        released.set()
    assert time.monotonic() - start < 20
    assert json.loads(returned.tool_return) == {
        "query": "slow", "error": "Search failed (searxng): no answer within 1.5 s"}


# -- fetch_webpage ---------------------------------------------------------------------------

PAGE = """<html><head><title>Gardening</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Growing tomatoes</h1>
<p>Tomatoes need full sun and <b>regular watering</b>. Plant them after the last frost, when
the soil has warmed, and give each plant at least sixty centimetres of space.</p>
<ul><li>Stake the plants early</li><li>Mulch to keep moisture in</li></ul>
<p>Harvest when the fruit is evenly coloured and slightly soft to the touch.</p>
</article><footer>Copyright 2025</footer></body></html>"""


def test_fetch_webpage_gives_markdown_when_private_urls_are_allowed(
        client: Letta, script: Script, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    site.routes["/start"] = redirect_to("/garden")
    site.routes["/garden"] = html_answer(PAGE)
    monkeypatch.setenv("STATELOOP_FETCH_PRIVATE_URLS", "1")
    returned = call_tool(client, script, "fetch_webpage", url=site.url + "/start")
    assert returned.status == "success"
    text = returned.tool_return
    assert "# Growing tomatoes" in text
    assert "- Stake the plants early" in text
    assert "**regular watering**" in text
    assert "<p>" not in text and "Copyright" not in text  # boilerplate left out


def test_fetch_webpage_refuses_loopback_by_default(client: Letta, script: Script,
                                                    site: Site) -> None:
    site.routes["/secret"] = html_answer("<p>internal</p>")
    for url in (site.url + "/secret",
                site.url.replace("127.0.0.1", "localhost") + "/secret"):
        returned = call_tool(client, script, "fetch_webpage", url=url)
        assert returned.status == "error"
        assert "loopback, private or link-local" in returned.tool_return
        assert "STATELOOP_FETCH_PRIVATE_URLS" in returned.tool_return
    assert site.requests == []


def test_a_redirect_from_a_public_hop_to_loopback_is_refused(
        client: Letta, script: Script, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """127.0.0.2 is taken for a public address here; it redirects to 127.0.0.1, which must
    not be reached."""
    original = addresses.public
    monkeypatch.setattr(addresses, "public",
                        lambda address: address == "127.0.0.2" or original(address))
    site.routes["/secret"] = html_answer("<p>internal</p>")
    with Site("127.0.0.2") as public_hop:
        public_hop.routes["/go"] = redirect_to(site.url + "/secret")
        returned = call_tool(client, script, "fetch_webpage", url=public_hop.url + "/go")
        assert [r["path"] for r in public_hop.requests] == ["/go"]  # the first hop was made
    assert returned.status == "error"
    assert "127.0.0.1 is a loopback, private or link-local address" in returned.tool_return
    assert site.requests == []


def test_a_name_that_resolves_elsewhere_the_second_time_reaches_nothing_new(
        client: Letta, script: Script, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS rebinding: rebind.test resolves to a (public-looking) 127.0.0.2 when checked and
    to 127.0.0.1 at every later look-up; the fetch connects to the address it checked."""
    original_public, original_lookup = addresses.public, socket.getaddrinfo
    monkeypatch.setattr(addresses, "public",
                        lambda address: address == "127.0.0.2" or original_public(address))
    lookups: list[str] = []

    def lookup(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in ("rebind.test", b"rebind.test"):
            lookups.append("rebind.test")
            return original_lookup("127.0.0.2" if len(lookups) == 1 else "127.0.0.1", port,
                                   *args, **kwargs)
        return original_lookup(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    site.routes["/page"] = html_answer("<p>internal</p>")
    port = site.server.server_address[1]
    with Site("127.0.0.2", port) as checked:  # the checked address, on the same port
        checked.routes["/page"] = html_answer(PAGE)
        returned = call_tool(client, script, "fetch_webpage",
                             url=f"http://rebind.test:{port}/page")
        assert [r["headers"]["host"] for r in checked.requests] == [f"rebind.test:{port}"]
    assert returned.status == "success" and "Growing tomatoes" in returned.tool_return
    assert lookups == ["rebind.test"]
    assert site.requests == []


def test_fetch_webpage_follows_a_bounded_number_of_redirects(
        client: Letta, script: Script, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    site.routes["/loop"] = redirect_to("/loop")
    monkeypatch.setenv("STATELOOP_FETCH_PRIVATE_URLS", "1")
    returned = call_tool(client, script, "fetch_webpage", url=site.url + "/loop")
    assert returned.status == "error" and "TooManyRedirects" in returned.tool_return
    assert len(site.requests) == 6  # the first request and five redirects


def test_fetch_webpage_reads_at_most_the_size_cap(
        client: Letta, script: Script, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    site.routes["/big"] = lambda request: (200, {"content-type": "text/plain"},
                                           b"word " * 2_000_000)
    monkeypatch.setenv("STATELOOP_FETCH_PRIVATE_URLS", "1")
    monkeypatch.setenv("STATELOOP_FETCH_MAX_BYTES", "50000")
    returned = call_tool(client, script, "fetch_webpage", url=site.url + "/big")
    assert returned.status == "success"
    assert returned.tool_return.endswith("[the page was cut at 50000 bytes]")
    assert len(returned.tool_return) < 50_100


def test_fetch_webpage_refuses_other_schemes(client: Letta, script: Script) -> None:
    returned = call_tool(client, script, "fetch_webpage", url="file:///etc/passwd")
    assert returned.status == "error"
    assert "Only 'http' and 'https' URLs are supported" in returned.tool_return
