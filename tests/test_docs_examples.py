"""Every Python block in README.md and docs/ runs as written; the commands the docs show exist.

A block runs in a fresh Python process in its own directory (so ``sqlite:///agents.db`` is a
new file there), against what the docs tell a reader to start:

- ``openai/...`` models answer through the echoing fake provider (``python -m
  stateloop.testing.fake_openai``): ``OPENAI_BASE_URL`` names it, ``OPENAI_API_KEY`` is set;
- a block that imports ``letta_client`` talks to a ``stateloop serve`` started for the test
  on a free port, which replaces the ``:8283`` the docs write (the server's default port).

A block whose fence carries ``title="fragment..."`` (a part of a larger program: it names
things defined elsewhere, or needs a service the reader runs) is only compiled. The docs'
contributing page states these rules.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
import typer

from stateloop.cli.app import app
from stateloop.testing import FakeOpenAI, reply
from stateloop.llm.base import ModelRequest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
BLOCK_TIMEOUT = 60  # seconds; the slowest block (a server round trip) takes about 2


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, from 1
    language: str
    info: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def fragment(self) -> bool:
        return re.search(r'title="fragment', self.info) is not None


def fenced_blocks(page: Path) -> Iterator[Block]:
    """The fenced code blocks of a Markdown page, list-item indentation removed."""
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        language, _, info = opening["info"].strip().partition(" ")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            line = lines[j]
            body.append(line[indent:] if not line[:indent].strip() else line.lstrip())
            j += 1
        assert j < len(lines), f"{page.relative_to(ROOT)}:{i + 1}: a fence is never closed"
        yield Block(page, i + 1, language, info, "\n".join(body) + "\n")
        i = j + 1


BLOCKS = [block for page in PAGES for block in fenced_blocks(page)]
PYTHON = [block for block in BLOCKS if block.language in ("python", "py")]
SHELL = [block for block in BLOCKS if block.language in ("sh", "bash", "shell", "console")]


def test_the_docs_have_python_blocks_and_few_fragments() -> None:
    runnable = [block for block in PYTHON if not block.fragment]
    assert len(runnable) >= 25, [block.name for block in runnable]
    assert len(runnable) >= 2 * (len(PYTHON) - len(runnable)), "most blocks must run"
    readme = [block for block in runnable if block.page.name == "README.md"]
    assert readme, "README.md's example must run"


# --- the services the docs name --------------------------------------------------------------

def _echo(request: ModelRequest) -> object:
    last = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
    return reply(f"You said: {last}")


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(_echo) as fake:
        yield fake


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(provider: FakeOpenAI, home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("STATELOOP_", "OPENAI_", "ANTHROPIC_", "LETTA_"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT / "src"), PYTHONUNBUFFERED="1",
               OPENAI_BASE_URL=provider.base_url, OPENAI_API_KEY="test",
               STATELOOP_DATABASE_URL=f"sqlite:///{home / 'stateloop.db'}")
    return env


@pytest.fixture(scope="module")
def server(provider: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``stateloop serve`` on a free port, its models answered by the fake provider."""
    home = tmp_path_factory.mktemp("server")
    port = _free_port()
    log = (home / "serve.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "stateloop", "serve", "--port", str(port)],
        cwd=home, env=_environment(provider, home), stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/v1/health", timeout=2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "stateloop serve did not start:\n"
                        + (home / "serve.log").read_text()) from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


# --- Python blocks ---------------------------------------------------------------------------

@pytest.mark.parametrize("block", PYTHON, ids=lambda block: block.name)
def test_python_block_runs(block: Block, provider: FakeOpenAI, request: pytest.FixtureRequest,
                           tmp_path: Path) -> None:
    code = block.code
    if block.fragment:
        compile(code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return
    if "letta_client" in code:
        url = request.getfixturevalue("server")
        code = re.sub(r"http://(127\.0\.0\.1|localhost):8283", url, code)
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    try:
        done = subprocess.run([sys.executable, script.name], cwd=tmp_path,
                              env=_environment(provider, tmp_path), capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.name} ran over {BLOCK_TIMEOUT} s:\n{exc.stdout}\n{exc.stderr}")
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout}\n{done.stderr}"


# --- shell blocks: the commands they show exist ----------------------------------------------

def _command_paths() -> set[tuple[str, ...]]:
    root = typer.main.get_command(app)
    paths: set[tuple[str, ...]] = set()

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        paths.add(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(root, ())
    return paths


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {match[1] for match in re.finditer(r"^([a-z][\w-]*):", text, re.MULTILINE)}


def _command_lines(block: Block) -> Iterator[list[str]]:
    """Each ``stateloop ...`` or ``make ...`` command in a shell block, as words."""
    for raw in block.code.replace("\\\n", " ").splitlines():
        line = raw.split(" #", 1)[0].strip().removeprefix("$ ")
        for command in line.split(" | "):  # `stateloop serve | stateloop up`: either
            words = shlex.split(command)
            if words and words[0] in ("stateloop", "make"):
                yield words


@pytest.mark.parametrize("block", SHELL, ids=lambda block: block.name)
def test_shell_block_commands_exist(block: Block) -> None:
    paths, targets = _command_paths(), _make_targets()
    for words in _command_lines(block):
        named = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
        if words[0] == "make":
            assert set(named) <= targets, f"{block.name}: no make target in {words}"
            continue
        if not named:
            continue
        assert (named[0],) in paths, f"{block.name}: no command `stateloop {named[0]}`"
        if any(path[:1] == (named[0],) and len(path) == 2 for path in paths):
            # a group: `stateloop agents list|create` names its subcommands
            for sub in named[1].split("|") if len(named) > 1 else []:
                assert (named[0], sub) in paths, f"{block.name}: no `stateloop {named[0]} {sub}`"
