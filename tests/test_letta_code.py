"""Letta Code, Letta's own CLI (pinned, installed from npm), against ``stateloop serve`` with
the fake model behind it: its default first run, a resumed agent, a client-side tool call
with its approval, a subagent, MemFS, ``letta mcp``, a compaction, a background stream resumed
after its connection dropped, a password, and its terminal UI under tmux.

Every flow also checks the server's access log: no request Letta Code made was answered
404 or 5xx (it ignores most such answers silently, so the output alone would not tell).
"""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_script import Script, held
from letta_code_support import NotInstallable, letta_code
from mcp_support import demo_command
from patience import ANSWERS, STOPS
from started import stop, wait_until_healthy
from stateloop.llm.base import ModelRequest
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import ScriptItem, call, error, reply
from test_cli_chat_tmux import Tmux
from test_cli_support import (  # noqa: F401 (fixtures)
    base_env,
    console_script,
    fake,
    free_port,
    script,
)

RUNS = 180  # seconds one `letta` command may take on a loaded machine (it takes 2-6 s)
MODEL = "gpt-4o-mini"  # the server's default model, which Letta Code's agents get
SEAL = "q3Vh1cJm0cX0Yw1dHqM1kTqv2w6tq5Fv8dX3rW9yP0E="  # a Fernet key for providers' keys
PING = 0.5  # seconds between the server's keep-alive pings: a quiet stream's first event
REFUSED = re.compile(r'"(GET|POST|PATCH|PUT|DELETE) (\S+) HTTP/1\.1" (404|5\d\d)')


@dataclass
class Serving:
    """``stateloop serve`` with its output in a file (a pipe nobody reads would fill)."""

    url: str
    log: Path

    def refused_since(self, offset: int) -> list[str]:
        """Requests answered 404 or 5xx after ``offset`` bytes of the log."""
        with self.log.open(errors="replace") as file:
            file.seek(offset)
            return [" ".join(m.groups()) for m in REFUSED.finditer(file.read())]

    def mark(self) -> int:
        return self.log.stat().st_size

    def get(self, path: str, **params: Any) -> Any:
        answer = httpx.get(f"{self.url}{path}", params=params, timeout=ANSWERS)
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.fixture(scope="module")
def letta_js() -> Path:
    try:
        return letta_code()
    except NotInstallable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> str:
    return demo_command(tmp_path_factory.mktemp("mcp"))


@contextlib.contextmanager
def serving_with(env: dict[str, str], home: Path) -> Iterator[Serving]:
    """``stateloop serve`` with this environment, its log in ``home``."""
    port = free_port()
    log = home / "serve.log"
    with log.open("w") as output:
        process = subprocess.Popen([*console_script(), "serve", "--port", str(port)],
                                   env=env, stdout=output, stderr=subprocess.STDOUT)
    serving = Serving(f"http://127.0.0.1:{port}", log)
    try:
        wait_until_healthy(serving.url, process, log.read_text)
        yield serving
    finally:
        stop(process)


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, demo: str, letta_js: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    home = tmp_path_factory.mktemp("server")
    env = base_env(home)
    env.update(STATELOOP_DATABASE_URL=f"sqlite:///{home / 'agents.db'}",
               OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="test-key",
               STATELOOP_MCP_STDIO_COMMANDS=demo, STATELOOP_PING_INTERVAL=str(PING),
               STATELOOP_ENCRYPTION_KEY=SEAL,  # `letta connect` stores a key
               STATELOOP_PROVIDER_PRIVATE_URLS="1")  # at the fake, on loopback
    with serving_with(env, home) as serving:
        yield serving


@dataclass
class LettaCode:
    """Runs ``letta ARGS`` as a user would: a home of its own, the server's URL, nothing
    else of this environment (no key, no Letta Cloud)."""

    script: Path
    url: str
    home: Path
    cwd: Path

    def environment(self, **extra: str) -> dict[str, str]:
        tools = {str(Path(found).parent) for found in map(shutil.which, ("node", "git"))
                 if found}
        return {"PATH": os.pathsep.join([*sorted(tools), "/usr/bin", "/bin"]),
                "HOME": str(self.home), "LETTA_BASE_URL": self.url,
                "DISABLE_AUTOUPDATER": "1",  # the test's install is not to change
                "TERM": "dumb", "NO_COLOR": "1", **extra}

    def __call__(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([shutil.which("node") or "node", str(self.script), *args],
                              env=self.environment(**extra), cwd=self.cwd, capture_output=True,
                              text=True, timeout=RUNS)

    def ok(self, *args: str, **extra: str) -> str:
        done = self(*args, **extra)
        assert done.returncode == 0, f"letta {shlex.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def memfs(self) -> dict[str, str]:
        """What Letta Code needs to keep an agent's memory in git on this server."""
        return {"LETTA_MEMFS_LOCAL": "1", "LETTA_MEMFS_BASE_URL": self.url}


@pytest.fixture
def letta(letta_js: Path, server: Serving, script: Script, tmp_path: Path) -> LettaCode:
    script.set()
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    return LettaCode(letta_js, server.url, tmp_path / "home", tmp_path / "work")


def new_agent(letta: LettaCode, script: Script, *args: str, **extra: str) -> dict[str, Any]:
    """The first run's agent (``letta -p``), as ``--output-format json`` reports it."""
    script.set(reply("Ready."))
    result = json.loads(letta.ok("-p", "Hello", *args, "--output-format", "json", **extra))
    assert result["result"] == "Ready.", result
    return dict(result)


def test_the_default_first_run_replies(letta: LettaCode, server: Serving, script: Script,
                                       fake: FakeOpenAI) -> None:
    mark = server.mark()
    script.set(reply("Hi from stateloop."))
    assert letta.ok("-p", "Say hi").strip() == "Hi from stateloop."
    assert server.refused_since(mark) == []
    agents = server.get("/v1/agents/", include=["agent.tools", "agent.tags"],
                        name="Letta Code")
    newest = max(agents, key=lambda agent: agent["created_at"])
    assert {"web_search", "fetch_webpage"} <= {tool["name"] for tool in newest["tools"]}
    assert "origin:letta-code" in newest["tags"]
    assert fake.requests[-1].body["model"] == MODEL


def test_a_resumed_agent_replies_with_its_memory(letta: LettaCode, server: Serving,
                                                 script: Script) -> None:
    agent_id = new_agent(letta, script)["agent_id"]
    before = len(server.get("/v1/agents/"))
    mark = server.mark()
    script.set(reply("Welcome back."))
    assert letta.ok("--agent", agent_id, "-p", "It is me again").strip() == "Welcome back."
    assert server.refused_since(mark) == []
    assert len(server.get("/v1/agents/")) == before  # the same agent, no new one
    persona = server.get(f"/v1/agents/{agent_id}/core-memory/blocks/persona")["value"]
    assert persona.splitlines()[0] in script.requests[-1].messages[0].text
    listed = json.loads(letta.ok("model", "list"))  # the models the server offers
    assert f"openai/{MODEL}" in {model["handle"] for model in listed}


def test_a_client_side_tool_call_runs_after_its_approval(letta: LettaCode, server: Serving,
                                                         script: Script) -> None:
    agent_id = new_agent(letta, script)["agent_id"]
    mark = server.mark()
    script.set(call("exec_command", cmd="echo ran-on-the-client > made.txt && echo done",
                    description="Write a file"),
               reply("Wrote it."))
    result = json.loads(letta.ok("--agent", agent_id, "-p", "Write the file",
                                 "--output-format", "json"))
    assert result["result"] == "Wrote it."
    assert (letta.cwd / "made.txt").read_text() == "ran-on-the-client\n"
    returned = script.requests[-1].messages[-1]  # what the model saw: the command's output
    assert returned.role == "tool" and "done" in returned.text
    kinds = [m["message_type"] for m in server.get(
        f"/v1/conversations/{result['conversation_id']}/messages", limit=50, order="asc")]
    assert kinds[-4:] == ["tool_call_message", "approval_response_message",
                          "tool_return_message", "assistant_message"]
    assert server.refused_since(mark) == []


def test_letta_mcp_lists_and_calls_the_servers_mcp_servers(letta: LettaCode, server: Serving,
                                                           script: Script, demo: str) -> None:
    agent_id = new_agent(letta, script)["agent_id"]
    registered = httpx.post(f"{server.url}/v1/mcp-servers", timeout=ANSWERS, json={
        "server_name": "demo", "config": {"mcp_server_type": "stdio", "command": demo,
                                          "args": []}})
    assert registered.status_code == 200, registered.text
    mark = server.mark()
    assert json.loads(letta.ok("mcp", "list", "--agent", agent_id)) == [
        {"name": "demo", "transport": "stdio"}]
    tools = json.loads(letta.ok("mcp", "tools", "demo", "--agent", agent_id))
    assert "mcp__demo__add" in {tool["name"] for tool in tools}
    found = json.loads(letta.ok("mcp", "search", "add", "--agent", agent_id))
    assert "mcp__demo__add" in json.dumps(found), found
    result = json.loads(letta.ok("mcp", "call", "mcp__demo__add", "--agent", agent_id,
                                 "--args", '{"a": 2, "b": 3}'))
    assert result == {"content": [{"type": "text", "text": "5"}], "isError": False}
    assert server.refused_since(mark) == []


def test_a_full_context_is_compacted_with_the_agents_own_model(
        letta: LettaCode, server: Serving, script: Script, fake: FakeOpenAI) -> None:
    """Letta Code's agents ask for ``compaction_settings.model = "letta/auto"``, Letta
    Cloud's router: here the agent's own model writes the summary."""
    conversation = new_agent(letta, script)["conversation_id"]
    for turn in range(2):
        script.set(reply(f"Answer {turn}."))
        letta.ok("--conversation", conversation, "-p", f"Question {turn}")
    mark, calls = server.mark(), len(fake.requests)
    script.set(error("context_overflow", "This model's maximum context length is exceeded."),
               reply("The user asked two questions."),
               reply("Still here after the compaction."))
    out = letta.ok("--conversation", conversation, "-p", "One more")
    assert out.strip() == "Still here after the compaction."
    overflowed, summary, retried = fake.requests[calls:]
    assert [r.body["model"] for r in (overflowed, summary, retried)] == [MODEL] * 3
    assert len(retried.body["messages"]) < len(overflowed.body["messages"])
    assert "The user asked two questions." in json.dumps(retried.body["messages"])
    assert server.refused_since(mark) == []


def test_a_subagent_is_an_agent_of_its_own_on_the_server(letta: LettaCode, server: Serving,
                                                          script: Script) -> None:
    agent_id = new_agent(letta, script)["agent_id"]

    def answer(request: ModelRequest) -> ScriptItem:  # parent and subagent run side by side
        asked = request.messages[-1].text
        return reply("SUBAGENT-DONE" if "Say SUBAGENT-DONE" in asked else "It finished.")

    script.set(call("Agent", description="Say a word", prompt="Say SUBAGENT-DONE",
                    subagent_type="general-purpose"), answer, answer, answer)
    mark = server.mark()
    assert letta.ok("--agent", agent_id, "-p", "Use a subagent").strip() == "It finished."
    subagents = [agent for agent in server.get("/v1/agents/", include=["agent.tags"])
                 if f"parent:{agent_id}" in agent["tags"]]
    assert [agent["tags"].count("role:subagent") for agent in subagents] == [1]
    assert any("Say SUBAGENT-DONE" in request.messages[-1].text for request in script.requests)
    assert server.refused_since(mark) == []


def test_memfs_clones_the_agents_memory_from_the_server(letta: LettaCode, server: Serving,
                                                        script: Script) -> None:
    mark = server.mark()
    agent_id = new_agent(letta, script, "--memfs", **letta.memfs())["agent_id"]
    assert "git-memory-enabled" in server.get(f"/v1/agents/{agent_id}")["tags"]
    memory = letta.home / ".letta" / "agents" / agent_id / "memory"
    human = server.get(f"/v1/agents/{agent_id}/core-memory/blocks/human")["value"]
    assert (memory / "human.md").read_text().endswith(human)
    assert server.refused_since(mark) == []


def test_a_memory_edit_through_memfs_reaches_the_block(letta: LettaCode, server: Serving,
                                                       script: Script) -> None:
    """Letta Code 0.32.18 keeps an agent it made in its memfs-v2 layout (a root MEMORY.md);
    its commit hook takes the files the server serves, and its push reaches the block and
    the agent's next model request."""
    agent_id = new_agent(letta, script, "--memfs", **letta.memfs())["agent_id"]
    memory = letta.home / ".letta" / "agents" / agent_id / "memory"
    assert not (memory / "MEMORY.md").read_text().startswith("---")
    assert (memory / "human.md").read_text().startswith('---\nname: "Human"\ndescription: "')
    first = server.get(f"/v1/agents/{agent_id}/core-memory/blocks/human")["value"]
    first = first.splitlines()[0]
    patch = ("*** Begin Patch\n*** Update File: human.md\n@@\n"
             f" {first}\n+The user's name is Ada Lovelace.\n*** End Patch")
    script.set(call("memory_apply_patch", reason="Remember the user's name", input=patch),
               reply("Noted."))
    mark = server.mark()
    letta.ok("--agent", agent_id, "-p", "My name is Ada Lovelace", **letta.memfs())
    block = server.get(f"/v1/agents/{agent_id}/core-memory/blocks/human")["value"]
    assert "The user's name is Ada Lovelace." in block
    assert script.requests[-1].messages[-1].text.startswith("memory_apply_patch committed")
    commits = server.get(f"/v1/agents/{agent_id}/memory/commits")
    assert commits[0]["author_type"] == "user" and "human.md" in commits[0]["files_changed"]
    script.set(reply("Hello, Ada."))
    letta.ok("--agent", agent_id, "-p", "Who am I?", **letta.memfs())
    assert "The user's name is Ada Lovelace." in script.requests[-1].messages[0].text
    assert server.refused_since(mark) == []


def typed(tmux: Tmux, text: str) -> None:
    """Type ``text`` into the input until it shows (keys sent while the UI still starts are
    dropped), then Enter."""
    deadline = time.monotonic() + RUNS
    while f"\N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK} {text}" not in tmux.screen():
        assert time.monotonic() < deadline, f"the input never took keys:\n{tmux.screen()}"
        tmux.tmux("send-keys", "-t", "chat", "C-u")
        tmux.tmux("send-keys", "-t", "chat", "-l", text)
        time.sleep(1)
    tmux.tmux("send-keys", "-t", "chat", "Enter")


@pytest.mark.skipif(shutil.which("tmux") is None,
                    reason="tmux is not installed (apt-get install -y tmux); it drives the TUI")
def test_the_terminal_ui_shows_a_reply(letta: LettaCode, server: Serving, script: Script,
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    tmux = Tmux(f"stateloop-letta-{tmp_path_factory.getbasetemp().name}-{time.time_ns()}")
    script.set(reply("Hello from the terminal."))
    env = letta.environment(TERM="xterm-256color")
    env.pop("NO_COLOR")
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
    command = shlex.join([shutil.which("node") or "node", str(letta.script)])
    mark = server.mark()
    try:
        tmux.start(f"cd {shlex.quote(str(letta.cwd))} && env -i {assignments} {command}; "
                   "echo LETTA-EXIT=$?; sleep 60")
        screen = tmux.wait_for('Try "', timeout=RUNS)  # the input's hint: it takes keys
        assert "outdated" not in screen  # /v1/health reports Letta's API version
        typed(tmux, "hello there")
        screen = tmux.wait_for("Hello from the terminal.", timeout=RUNS)
        assert "LETTA-EXIT" not in screen
    finally:
        tmux.kill()
    assert server.refused_since(mark) == []


class DroppingProxy:
    """A TCP relay on loopback to the server that cuts the connection of the first
    message-sending POST once its response's first event has passed (a dropped network):
    the run goes on on the server, the client sees its stream end without a stop reason."""

    def __init__(self, upstream: str) -> None:
        self.upstream_port = int(upstream.rsplit(":", 1)[1])
        self.dropped = threading.Event()
        self.posts: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> DroppingProxy:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(ANSWERS)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(ANSWERS)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(STOPS)
        self.loop.close()

    async def _listen(self) -> None:
        self.server = await asyncio.start_server(self._relay, sock=self.listener)

    async def _close(self) -> None:
        self.server.close()
        pending = asyncio.all_tasks() - {asyncio.current_task()}
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _relay(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        upstream, to_upstream = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        sending = asyncio.Event()  # this connection carries the POST whose stream is cut
        here, there = self.url.removeprefix("http://"), f"127.0.0.1:{self.upstream_port}"

        async def requests() -> None:
            with contextlib.suppress(OSError):
                while data := await client.read(65536):
                    line = data.split(b"\r\n", 1)[0].decode(errors="replace")
                    if line.startswith("POST "):
                        self.posts.append(line)
                        if "/messages " in line and not self.dropped.is_set():
                            sending.set()
                    # the server checks Host against the address it serves
                    to_upstream.write(data.replace(here.encode(), there.encode()))
                    await to_upstream.drain()
            to_upstream.close()

        async def responses() -> None:
            with contextlib.suppress(OSError):
                while data := await upstream.read(65536):
                    to_client.write(data)
                    await to_client.drain()
                    if sending.is_set() and b"data:" in data and not self.dropped.is_set():
                        self.dropped.set()
                        to_client.transport.abort()
                        to_upstream.close()
                        return
            to_client.close()

        await asyncio.gather(requests(), responses())


def test_a_background_stream_is_resumed_after_its_connection_drops(
        letta: LettaCode, server: Serving, script: Script) -> None:
    agent_id = new_agent(letta, script)["agent_id"]
    answered = threading.Event()
    script.set(held(answered, reply("Still here after the drop."), limit=RUNS))
    mark = server.mark()
    with DroppingProxy(server.url) as proxy:
        through = LettaCode(letta.script, proxy.url, letta.home, letta.cwd)
        watcher = threading.Thread(target=lambda: proxy.dropped.wait(RUNS) and answered.set())
        watcher.start()
        try:
            out = through.ok("--agent", agent_id, "-p", "Are you there?")
        finally:
            answered.set()
            watcher.join()
    assert proxy.dropped.is_set()
    assert out.strip() == "Still here after the drop."
    sent = [post for post in proxy.posts if "/messages " in post]
    resumed = [post for post in proxy.posts if re.match(r"POST /v1/runs/run-[^/]+/stream ", post)]
    assert len(sent) == 1 and len(resumed) == 1, proxy.posts  # the turn was not sent twice
    assert server.refused_since(mark) == []


def test_a_password_protected_server_takes_letta_api_key(
        letta_js: Path, fake: FakeOpenAI, script: Script, tmp_path: Path) -> None:
    """Letta Code sends ``LETTA_API_KEY`` as the bearer token, git included (MemFS)."""
    home = tmp_path / "server"
    home.mkdir()
    env = base_env(home)
    env.update(STATELOOP_DATABASE_URL=f"sqlite:///{home / 'agents.db'}",
               OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="test-key",
               STATELOOP_SERVER_PASSWORD="pw-for-letta-code")
    with serving_with(env, home) as secured:
        letta = LettaCode(letta_js, secured.url, tmp_path / "home", tmp_path)
        letta.home.mkdir()
        assert letta("-p", "Say hi").returncode == 1  # no key: refused, nothing created
        listed = httpx.get(f"{secured.url}/v1/agents/", timeout=ANSWERS,
                           headers={"Authorization": "Bearer pw-for-letta-code"})
        assert listed.json() == []
        key = {"LETTA_API_KEY": "pw-for-letta-code"}
        created = new_agent(letta, script, "--memfs", **key, **letta.memfs())
        memory = letta.home / ".letta" / "agents" / created["agent_id"] / "memory"
        assert (memory / "human.md").exists()  # cloned over git with the key
        script.set(reply("Hello again."))
        assert letta.ok("--agent", created["agent_id"], "-p", "Hi", **key).strip() == (
            "Hello again.")


def test_letta_connect_adds_a_provider_whose_models_agents_use(
        letta: LettaCode, server: Serving, script: Script, fake: FakeOpenAI) -> None:
    out = letta.ok("connect", "openai-compatible", "--base-url", fake.base_url,
                   "--api-key", "sk-connected-5d2e")
    assert "Connected" in out, out
    added = server.get("/v1/providers", provider_category="byok")
    assert [(p["name"], p["provider_type"]) for p in added] == [
        ("lc-openai-compatible", "openai")]
    assert "sk-connected-5d2e" not in json.dumps(added)
    created = httpx.post(f"{server.url}/v1/agents", timeout=ANSWERS, json={
        "model": f"lc-openai-compatible/{MODEL}", "include_base_tools": False})
    assert created.status_code == 200, created.text
    script.set(reply("Connected and talking."))
    seen = len(fake.requests)
    answer = httpx.post(f"{server.url}/v1/agents/{created.json()['id']}/messages",
                        timeout=ANSWERS,
                        json={"messages": [{"role": "user", "content": "hello"}]})
    assert answer.json()["messages"][-1]["content"] == "Connected and talking."
    calls = [r for r in fake.requests[seen:] if r.path.endswith("/chat/completions")]
    assert calls[0].headers["authorization"] == "Bearer sk-connected-5d2e"
