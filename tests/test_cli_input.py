"""What the CLI accepts before anything runs: help texts, messages, the database path, and
the context window of a model stateloop does not know."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.main import get_command
from typer.testing import CliRunner

from stateloop.cli.app import MAX_MESSAGE_BYTES, app
from stateloop.server.settings import ServerSettings
from stateloop.testing.scripted import reply
from test_cli_support import Cli, Script, cli, fake, script  # noqa: F401 (fixtures)


def commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's path under ``group`` (Typer's click objects: duck-typed)."""
    found = []
    for name, command in group.commands.items():
        found.append((*path, name))
        if hasattr(command, "commands"):
            found += commands(command, (*path, name))
    return found


def help_text(*path: str) -> str:
    """``stateloop PATH --help`` as words, without the boxes and the wrapping."""
    done = CliRunner().invoke(app, [*path, "--help"])
    assert done.exit_code == 0, done.output
    return " ".join(done.output.replace("│", " ").split())


def test_every_help_text_keeps_its_brackets() -> None:
    """Rich markup would swallow an unescaped "[default: ...]" ("Port ." was shown)."""
    root = get_command(app)
    checked = 0
    for path in commands(root):
        command: Any = root
        for name in path:
            command = command.commands[name]
        wanted = [p for p in command.params if "[default:" in (getattr(p, "help", "") or "")]
        shown = help_text(*path)
        assert shown.count("[default:") >= len(wanted), (path, shown)
        checked += len(wanted)
    serve = help_text("serve")
    assert "Port ." not in serve and "Address to bind" in serve and "STATELOOP_PORT" in serve
    assert checked >= 10  # serve, up, run, chat, agents create, ...


def test_messages_are_refused_when_empty_or_larger_than_a_server_takes(
        cli: Cli, script: Script) -> None:
    assert ServerSettings().max_body_bytes == MAX_MESSAGE_BYTES
    cli.create("ada")
    for args, text in ((["run", "ada", ""], None), (["run", "ada", "  "], None),
                       (["run", "ada", "-"], "\n")):
        done = cli.inline(*args, input=text)
        assert (done.exit_code, done.stderr.startswith("error: no message")) == (2, True), args
    over = "x" * (MAX_MESSAGE_BYTES + 1)
    for args, text, what in ((["run", "ada", over], None, "the message"),
                             (["run", "ada", "-"], over, "standard input")):
        done = cli.inline(*args, input=text)
        assert done.exit_code == 2
        assert done.stderr.startswith(f"error: {what} is larger than 8 MiB"), done.stderr
    assert script.requests == []  # nothing was sent
    # Just under the cap, the message is taken, and refused next by the agent's window.
    under = cli.inline("run", "ada", "-", input="x" * (MAX_MESSAGE_BYTES - 1000))
    assert under.exit_code == 2, under.stderr
    assert under.stderr.startswith("error: the input is ") and "context window" in under.stderr
    script.set(reply("Read it."))
    assert cli.inline("run", "ada", "-", input="x" * 10_000).exit_code == 0
    assert script.requests


def test_a_database_in_a_missing_directory_is_refused(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    for args in (["agents", "list", "--db", str(missing / "x.db")],
                 ["agents", "create", "ada", "--db", f"sqlite:///{missing}/x.db"],
                 ["serve", "--db", str(missing / "x.db")]):
        done = cli.inline(*args)
        assert done.exit_code == 2, (args, done.output)
        assert "does not exist" in done.stderr and str(missing) in done.stderr
    done = cli.inline("agents", "list", env={"STATELOOP_DATABASE_URL": str(missing / "x.db")})
    assert done.exit_code == 2
    assert not (tmp_path / "no").exists()


def test_an_unknown_model_is_warned_about_once_and_its_window_can_be_set(
        cli: Cli, script: Script) -> None:
    warning = "unknown model 'openai/llama-local': assuming a 8192-token context window"
    made = cli("agents", "create", "ada", "--model", "openai/llama-local")
    assert made.returncode == 0 and warning in made.stderr
    assert "--context-window N" in made.stderr
    script.set(reply("Hi."))
    for args in (["run", "ada", "hi"], ["context", "ada"]):  # loads: no warning again
        done = cli(*args)
        assert done.returncode == 0 and "unknown model" not in done.stderr, done.stderr
    assert cli.inline_json("context", "ada")["context_window_size_max"] == 8192

    made = cli.inline("agents", "create", "bob", "--model", "openai/llama-local",
                      "--context-window", "32000")
    assert made.exit_code == 0 and "unknown model" not in made.stderr
    assert cli.inline_json("context", "bob")["context_window_size_max"] == 32000
    script.set(reply("Hi."))
    assert cli.inline("run", "ada", "hi", "--context-window", "16000").exit_code == 0
    assert cli.inline_json("context", "ada")["context_window_size_max"] == 16000  # stored
    assert cli.inline("run", "ada", "hi", "--context-window", "0").exit_code == 2
