"""A SQLite database a running server holds: the CLI talks to that server, a second server
and a library ``Agent`` are refused, so no second process keeps its own copy of an agent's
history."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from stateloop import Agent
from stateloop.errors import ConfigError
from stateloop.store import open_store
from stateloop.store import serving as held_by
from stateloop.testing.scripted import reply
from test_cli_support import Cli, Script, cli, fake, script, serving  # noqa: F401 (fixtures)


def said(script: Script) -> list[list[str]]:
    """The user messages each model request since the last ``script.set`` held."""
    return [[m.text for m in request.messages if m.role == "user"]
            for request in script.requests]


def test_the_cli_on_a_served_database_talks_to_the_server(cli: Cli, script: Script) -> None:
    cli.create("ada")
    with serving(cli) as url:
        assert held_by(f"sqlite:///{cli.db}") == url
        script.set(reply("One."), reply("Two."))
        first = cli("run", "ada", "first message")  # no --server: the database says where
        assert (first.returncode, first.stdout) == (0, "One.\n"), first.stderr
        assert f"note: the stateloop server at {url} has this database open" in first.stderr
        second = cli.inline("run", "ada", "second message")
        assert (second.exit_code, second.stdout) == (0, "Two.\n")
        # The server's own next model request holds what the CLI sent before it: one history.
        assert said(script)[-1][-2:] == ["first message", "second message"]
        agent_id = cli.inline_json("agents", "show", "ada")["id"]
        over_http = httpx.get(f"{url}/v1/agents/{agent_id}/context").json()["num_messages"]
        assert over_http == 5  # system, two messages and two answers
        for where in ((), ("--server", url)):
            assert cli.inline_json("context", "ada", *where)["num_messages"] == over_http
        # `make chat`: `stateloop chat` with no name, on the database `make run` serves.
        script.set(reply("Hello from the server."))
        chat = cli.inline("chat", input="hello\n")
        assert chat.exit_code == 0 and "assistant> Hello from the server." in chat.stdout
        assert httpx.get(f"{url}/v1/agents", params={"name": "assistant"}).json()
        # What needs the agent in this process says where it runs instead.
        local_only = cli.inline("run", "ada", "hi", "--model", "openai/x")
        assert local_only.exit_code == 2 and "the server uses its own model" in (
            local_only.stderr)
    # Once the server is gone the CLI works on the file again, with the history it left.
    assert held_by(f"sqlite:///{cli.db}") is None
    script.set(reply("Three."))
    third = cli.inline("run", "ada", "third message")
    assert (third.exit_code, third.stdout) == (0, "Three.\n") and "note:" not in third.stderr
    assert said(script)[-1][-3:] == ["first message", "second message", "third message"]
    assert cli.inline_json("agents", "show", "assistant")["messages_in_context"] == 3


def test_a_second_server_on_a_served_database_is_refused(cli: Cli) -> None:
    with serving(cli) as url:
        for command in ("serve", "up"):
            done = cli(command, "--port", "1")  # refused before it binds anything
            assert done.returncode == 2, done.stderr
            assert done.stderr.startswith(
                f"error: the stateloop server at {url} already has this database open"), (
                done.stderr)
            assert f"--server {url}" in done.stderr
    assert cli.inline_json("agents", "list") == []  # up made nothing


def test_a_library_agent_on_a_served_database_is_refused(cli: Cli, tmp_path: Path) -> None:
    cli.create("ada")
    store = f"sqlite:///{cli.db}"
    with serving(cli) as url:
        with pytest.raises(ConfigError, match=f"the stateloop server at {url} has the "
                                              "database") as refused:
            Agent.load("ada", store=store)
        assert f"Letta(base_url='{url}')" in str(refused.value)
        with pytest.raises(ConfigError, match=url):
            Agent(model="demo/echo", store=store, name="other")
    assert [a["name"] for a in cli.inline_json("agents", "list")] == ["ada"]
    assert Agent.load("ada", store=store).name == "ada"  # the server gone, it loads


def test_a_store_opened_without_an_address_announces_nothing(tmp_path: Path) -> None:
    """Only a server says where it is; another open store is not a server to talk to."""
    url = f"sqlite:///{tmp_path / 'x.db'}"

    async def go() -> tuple[str | None, str | None]:
        store = await open_store(url)
        try:
            quiet = held_by(url)
            store.announce("http://127.0.0.1:1")
            return quiet, held_by(url)
        finally:
            await store.close()

    assert asyncio.run(go()) == (None, "http://127.0.0.1:1")
    assert held_by(url) is None
