"""``stateloop serve``, and the other commands against it with ``--server``."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from patience import ANSWERS, STARTS, STOPS
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from test_cli_support import Cli, Script, cli, console_script, fake, free_port, script, serving  # noqa: F401 (fixtures)


@pytest.fixture
def server(cli: Cli) -> Iterator[str]:
    """``stateloop serve`` in a subprocess on the test's database; yields its URL."""
    with serving(cli) as url:
        cli.env["STATELOOP_SERVER_URL"] = url
        yield url


def test_commands_against_a_server(cli: Cli, script: Script, server: str) -> None:
    cli.create("ada", "--approve", "memory_insert", "--block", "human=", "--tag", "srv")
    listed = cli.inline_json("agents", "list")
    assert [(a["name"], a["tags"]) for a in listed] == [("ada", ["srv"])]
    # It went through the server's REST API into the server's database.
    assert httpx.get(f"{server}/v1/agents", params={"name": "ada"}).json()[0]["id"] == (
        listed[0]["id"])

    script.set(reply("Hello from the server."))
    done = cli.inline("run", "ada", "hi")
    assert (done.exit_code, done.stdout) == (0, "Hello from the server.\n")

    script.set(call("memory_insert", label="human", new_string="Likes tea"), reply("Noted."))
    paused = cli.inline("run", "ada", "I like tea")
    assert paused.exit_code == 4 and '→ memory_insert(label="human"' in paused.stderr
    resumed = cli.inline("run", "ada", "--approve", "--json")
    frames = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert resumed.exit_code == 0
    assert {"message_type": "stop_reason", "stop_reason": "end_turn"}.items() <= (
        frames[-2].items())

    chat = cli.inline("chat", "ada", input="/memory\n/context\n/quit\n")
    assert chat.exit_code == 0 and "[human]\nLikes tea" in chat.stdout
    assert "context window: " in chat.stdout and "memory_insert(" in chat.stdout

    assert cli.inline("run", "nobody", "hi").exit_code == 2
    assert cli.inline("run", "ada", "hi", "--model", "openai/x").exit_code == 2
    done = cli.inline("agents", "delete", "ada", "--yes")
    assert done.exit_code == 0 and cli.inline_json("agents", "list") == []


def test_unreachable_server_is_a_configuration_error(cli: Cli) -> None:
    cli.env["STATELOOP_SERVER_URL"] = f"http://127.0.0.1:{free_port()}"
    done = cli.inline("agents", "list")
    assert done.exit_code == 3 and done.stderr.startswith("error: cannot reach the server")


class Up:
    """A ``stateloop up`` process: its URL, and its output once it has stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.output = ""


@contextmanager
def up(cli: Cli, *args: str, env: dict[str, str | None] | None = None,
       port: int | None = None) -> Iterator[Up]:
    """``stateloop up ARGS`` until its agents are listed on ``port`` (which ARGS or ``env``
    name); stopped (SIGINT) after."""
    port = port or free_port()
    process = subprocess.Popen([*console_script(), "up", *args],
                               env=cli.environment(env), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    running = Up(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + STARTS
        while True:
            try:
                httpx.get(f"{running.url}/v1/agents/", timeout=ANSWERS).raise_for_status()
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()  # else reading its output waits for it forever
                    raise AssertionError(
                        f"up did not serve: {process.communicate(timeout=STOPS)[0]}") from None
                time.sleep(0.1)
        yield running
    finally:
        process.send_signal(signal.SIGINT)
        try:
            running.output, _ = process.communicate(timeout=STOPS)
        finally:
            process.kill()


def run_up(cli: Cli, *args: str, env: dict[str, str | None] | None = None,
           port: int | None = None) -> tuple[list[dict[str, Any]], str]:
    """``stateloop up ARGS`` until its agents are listed; (agents, its output)."""
    with up(cli, *args, env=env, port=port) as running:
        agents: list[dict[str, Any]] = httpx.get(f"{running.url}/v1/agents/",
                                                 timeout=ANSWERS).json()
    return agents, running.output


def test_up_makes_an_agent_ready_and_serves(cli: Cli) -> None:
    """What ``make run`` does: an agent, instructions, and the server, with no provider set;
    the port from STATELOOP_PORT is the one it prints."""
    port = free_port()
    agents, output = run_up(cli, port=port, env={
        "OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "STATELOOP_PORT": str(port)})
    assert [a["name"] for a in agents] == ["assistant"]
    url = f"http://127.0.0.1:{port}"
    assert f"stateloop chat assistant --server {url}\n" in output
    assert f'Letta(base_url="{url}")' in output and "8283" not in output
    assert "set OPENAI_API_KEY, or OPENAI_BASE_URL (or --base-url)" in output
    assert "vLLM, Ollama, llama.cpp, LM Studio" in output and "--model openai/" in output
    # Not "ready" when its model cannot answer; the demo model is offered, by name.
    assert "is ready" not in output
    assert "agent assistant is made, but its model openai/gpt-4o-mini cannot answer" in output
    assert "make run MODEL=demo/echo" in output
    assert output.index("warning:") < output.index("agent assistant is made")


def test_up_with_the_demo_model_answers_with_no_provider(cli: Cli) -> None:
    """The Quick start without a key: the demo model, named, answers over the server."""
    no_provider: dict[str, str | None] = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}
    port = free_port()
    with up(cli, "--port", str(port), "--model", "demo/echo", env=no_provider,
            port=port) as running:
        done = cli.inline("run", "assistant", "hello there", env=no_provider)
        assert (done.exit_code, done.stdout) == (0, "You said: hello there\n"), done.stderr
        assert cli.inline_json("agents", "show", "assistant")["model"] == "demo/echo"
    assert "agent assistant is ready" in running.output and "warning" not in running.output
    # Only when chosen: an agent on a real model without a provider is never answered by it.
    cli.create("ada")
    refused = cli.inline("run", "ada", "hi", env=no_provider)
    assert refused.exit_code == 3 and "--model demo/echo" in refused.stderr


def test_no_provider_over_a_server_names_what_to_set(cli: Cli) -> None:
    """A server with no provider: its error names the variables and --model, not api_key=."""
    no_provider: dict[str, str | None] = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}
    cli.create("ada")
    with serving(cli, env=no_provider) as url:
        done = cli.inline("run", "ada", "hi", "--server", url)
    assert done.exit_code == 1
    [line] = done.stderr.strip().splitlines()
    assert "OPENAI_API_KEY" in line and "OPENAI_BASE_URL" in line and "--model" in line
    assert "demo/echo" in line and "api_key=" not in line


def test_up_takes_the_model_its_hints_name(cli: Cli, fake: FakeOpenAI, script: Script) -> None:
    """--base-url and --model (as the warning says), --context-window; on every interface it
    prints an address a client can use."""
    cli.create("assistant")  # made earlier with the default model: up switches it
    port = free_port()
    agents, output = run_up(
        cli, "--host", "0.0.0.0", "--insecure", "--port", str(port), "--model",
        "openai/llama-local", "--base-url", fake.base_url, "--context-window", "32000",
        env={"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}, port=port)
    assert [(a["name"], a["llm_config"]["context_window"]) for a in agents] == [
        ("assistant", 32000)]
    assert agents[0]["model"] == "openai/llama-local"
    assert "warning" not in output and "0.0.0.0" not in output
    assert f'Letta(base_url="http://127.0.0.1:{port}")' in output
    assert "every interface" in output
    assert f"stateloop chat assistant --server http://127.0.0.1:{port}\n" in output
    script.set(reply("Local."))
    done = cli.inline("run", "assistant", "hi", env={"OPENAI_BASE_URL": fake.base_url})
    assert (done.exit_code, done.stdout) == (0, "Local.\n")
    assert fake.requests[-1].body["model"] == "llama-local"


def test_a_port_in_use_is_named_with_how_to_choose_another(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in ("serve", "up"):
            done = cli(command, "--port", str(port))
            assert done.returncode == 2, done.stderr
            assert done.stderr.startswith(f"error: port {port} on 127.0.0.1 is already in use")
            assert "--port N or STATELOOP_PORT=N" in done.stderr
    assert cli.inline_json("agents", "list") == []  # up made nothing


def test_run_json_is_the_same_with_and_without_a_server(cli: Cli, script: Script) -> None:
    """Letta's streamed messages, one a line, whichever side runs the agent."""
    cli.create("ada", "--approve", "memory_insert")

    def frames(*args: str) -> list[dict[str, Any]]:
        script.set(reply("Hello there.", reasoning="Greet."),
                   call("memory_insert", label="human", new_string="x"))
        first = cli.inline("run", "ada", "hi", "--json", *args)
        paused = cli.inline("run", "ada", "more", "--json", *args)
        denied = cli.inline("run", "ada", "--deny", "no", "--json", *args)
        assert (first.exit_code, paused.exit_code, denied.exit_code) == (0, 4, 0)
        return [json.loads(line) for done in (first, paused, denied)
                for line in done.stdout.splitlines()]

    local = frames()
    with serving(cli) as url:
        remote = frames("--server", url)

    def shape(found: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
        kinds: list[tuple[str, list[str]]] = []
        for frame in found:
            kind = (frame["message_type"], sorted(frame))
            if not kinds or kinds[-1] != kind:  # text streams in chunks
                kinds.append(kind)
        return kinds

    assert shape(local) == shape(remote)
    kinds = [kind for kind, _ in shape(local)]
    for kind in ("reasoning_message", "assistant_message", "approval_request_message",
                 "tool_return_message", "stop_reason", "usage_statistics"):
        assert kind in kinds


def test_what_the_server_refuses_is_said_on_one_line(server: str, cli: Cli) -> None:
    done = cli.inline("agents", "create", "ada", "--model", "nowhere/x")
    assert done.exit_code == 2
    [line] = done.stderr.strip().splitlines()
    # FastAPI's 422 list, as the field's path and why: not raw JSON.
    assert line.startswith("error: server said 422: ") and "{" not in line, line


def test_a_message_that_is_not_utf8_is_refused_before_it_is_sent(cli: Cli) -> None:
    cli.create("ada", "--block", "human=")
    # Bytes that are not UTF-8 reach Python's argv as lone surrogates (surrogateescape).
    done = cli.inline("run", "ada", "caf\udce9")
    assert (done.exit_code, done.stderr) == (2, "error: the message is not valid UTF-8 text\n")
    piped = cli.inline("run", "ada", "-", input=b"caf\xe9")
    assert piped.exit_code == 2
    assert piped.stderr == "error: standard input is not valid UTF-8 text (byte 3)\n"
