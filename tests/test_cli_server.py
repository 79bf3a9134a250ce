"""``stateloop serve``, and the other commands against it with ``--server``."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from stateloop.testing.scripted import call, reply
from test_cli_support import Cli, Script, console_script, free_port, serving

pytest_plugins = ["test_cli_support"]  # fixtures: script, fake, cli


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


def test_up_makes_an_agent_ready_and_serves(cli: Cli) -> None:
    """What ``make run`` does: an agent, instructions, and the server, with no provider set."""
    port = free_port()
    env = cli.environment({"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None})
    process = subprocess.Popen([*console_script(), "up", "--port", str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        agents = None
        while agents is None:
            try:
                agents = httpx.get(f"{url}/v1/agents/", timeout=1).json()
            except httpx.HTTPError:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        assert [a["name"] for a in agents] == ["assistant"]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=10)
        finally:
            process.kill()
    assert "stateloop chat assistant" in output
    assert "set OPENAI_API_KEY, or OPENAI_BASE_URL" in output
    assert "vLLM, Ollama, llama.cpp, LM Studio" in output


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
