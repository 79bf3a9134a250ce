"""``stateloop chat`` in a real terminal: tmux runs it, the test types and reads the screen."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from patience import ANSWERS
from stateloop.testing.scripted import call, reply
from test_cli_support import Cli, Script, cli, console_script, fake, script  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None,
    reason="tmux is not installed (apt-get install -y tmux); it drives the chat test")


class Tmux:
    """One detached tmux session on a private server socket (so nothing else is touched)."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=ANSWERS)
        return done.stdout

    def start(self, command: str) -> None:
        self.tmux("new-session", "-d", "-s", "chat", "-x", "120", "-y", "60", command)

    def send(self, text: str) -> None:
        self.tmux("send-keys", "-t", "chat", "-l", text)  # -l: the characters, literally
        self.tmux("send-keys", "-t", "chat", "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "chat", "-S", "-200")

    def wait_for(self, text: str, timeout: float = ANSWERS) -> str:
        """Poll the screen until ``text`` shows (bounded), returning the screen."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not appear within {timeout} s; "
                                     f"screen:\n{screen}")
            time.sleep(0.1)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=ANSWERS)


@pytest.fixture
def tmux(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tmux]:
    session = Tmux(f"stateloop-test-{tmp_path_factory.getbasetemp().name}-{time.time_ns()}")
    yield session
    session.kill()


def test_chat_in_a_terminal(cli: Cli, script: Script, tmux: Tmux) -> None:
    cli.create("ada", "--approve", "memory_insert", "--block", "human=")
    script.set(call("memory_insert", label="human", new_string="Name: Bob"),
               reply("Nice to meet you, Bob."))
    env = cli.environment({"TERM": "xterm-256color", "NO_COLOR": None})
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
    chat = shlex.join([*console_script(), "chat", "ada"])
    # After the chat ends the shell prints its exit code and keeps the pane open to read.
    tmux.start(f"env -i {assignments} {chat}; echo CHAT-EXIT=$?; sleep 60")

    tmux.wait_for("you>")  # (the screen capture drops trailing spaces)
    tmux.send("my name is Bob")
    screen = tmux.wait_for("[y/n]")
    assert '→ memory_insert(label="human", new_string="Name: Bob")' in screen
    assert 'approve memory_insert(label="human", new_string="Name: Bob")? [y/n]' in screen

    tmux.send("y")
    screen = tmux.wait_for("ada> Nice to meet you, Bob.")
    assert "← Inserted into memory block 'human'" in screen

    tmux.send("/memory")
    tmux.wait_for("[human]\nName: Bob")
    tmux.send("/context")
    screen = tmux.wait_for("total ")
    assert "context window: " in screen and "tool call" in screen
    tmux.send("/quit")
    tmux.wait_for("CHAT-EXIT=0")
    assert "Traceback" not in tmux.screen()
    assert cli.inline_json("agents", "show", "ada")["blocks"][0]["value"] == "Name: Bob"
