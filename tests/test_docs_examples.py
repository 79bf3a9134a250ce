"""Every Python block in README.md and docs/ runs as written; the commands the docs show exist.

A block runs in a fresh Python process in its own directory (so ``sqlite:///agents.db`` is a
new file there), against what the docs tell a reader to start:

- ``openai/...`` models answer through the echoing fake provider (``python -m
  stateloop.testing.fake_openai``): ``OPENAI_BASE_URL`` names it, ``OPENAI_API_KEY`` is set;
- a block that imports ``letta_client`` talks to a ``stateloop serve`` started for the test
  on a free port, which replaces the ``:8283`` the docs write (the server's default port).

A block titled with a file name (``title="clock_server.py"``) is written under that name
into the directory of every other block of its page. A block whose fence carries
``title="fragment..."`` (a part of a larger program, or one that needs a service the reader
runs) is only compiled. docs/contributing.md states these rules.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
import typer

from started import stop, wait_until_healthy
from stateloop.cli.app import app
from stateloop.llm.base import ModelRequest
from stateloop.server.settings import ServerSettings
from stateloop.testing import FakeOpenAI, reply

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
BLOCK_TIMEOUT = 180  # seconds; the slowest (a file uploaded and embedded) takes 4 s of CPU
WORKERS = 4  # blocks run at once


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

    @property
    def file_name(self) -> str | None:
        """``title="clock_server.py"``: a file the page's other blocks use, under that name."""
        named = re.search(r'title="([\w.-]+\.py)"', self.info)
        return named[1] if named else None


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
RUNNABLE = [block for block in PYTHON if not (block.fragment or block.file_name)]
SHELL = [block for block in BLOCKS if block.language in ("sh", "bash", "shell", "console")]


def test_the_docs_have_python_blocks_and_few_fragments() -> None:
    assert len(RUNNABLE) >= 25, [block.name for block in RUNNABLE]
    assert len(RUNNABLE) >= 2 * (len(PYTHON) - len(RUNNABLE)), "most blocks must run"
    readme = [block for block in RUNNABLE if block.page.name == "README.md"]
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


@contextmanager
def serving(provider: FakeOpenAI, home: Path) -> Iterator[str]:
    """``stateloop serve`` on a free port, its models answered by the fake provider."""
    port = _free_port()
    with (home / "serve.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "stateloop", "serve", "--port", str(port)],
            cwd=home, env=_environment(provider, home), stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_healthy(url, process, (home / "serve.log").read_text)
            yield url
        finally:
            stop(process, signal.SIGTERM)


# --- Python blocks ---------------------------------------------------------------------------


@pytest.mark.parametrize("block", [block for block in PYTHON if block not in RUNNABLE],
                         ids=lambda block: block.name)
def test_fragment_compiles(block: Block) -> None:
    compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def run_block(block: Block, directory: Path, env: dict[str, str], server: str | None) -> str:
    """Run one block in ``directory``; '' when it succeeds, else what went wrong."""
    directory.mkdir()
    code = block.code
    for other in PYTHON:
        if other.page == block.page and other.file_name:
            (directory / other.file_name).write_text(other.code, encoding="utf-8")
    if server:
        code = re.sub(r"http://(127\.0\.0\.1|localhost):8283", server, code)
    (directory / "example.py").write_text(code, encoding="utf-8")
    env = {**env, "HOME": str(directory),
           "STATELOOP_DATABASE_URL": f"sqlite:///{directory / 'stateloop.db'}"}
    try:
        done = subprocess.run([sys.executable, "example.py"], cwd=directory, env=env,
                              capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        return f"ran over {BLOCK_TIMEOUT} s:\n{exc.stdout!r}\n{exc.stderr!r}"
    return "" if done.returncode == 0 else f"exit {done.returncode}:\n{done.stdout}{done.stderr}"


def test_python_blocks_run(provider: FakeOpenAI, tmp_path: Path) -> None:
    """Every runnable block, several at once (each is mostly a Python process starting);
    the server starts while the blocks that need none run."""
    env = _environment(provider, tmp_path)
    local = [block for block in RUNNABLE if "letta_client" not in block.code]
    remote = [block for block in RUNNABLE if "letta_client" in block.code]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        runs = {pool.submit(run_block, block, tmp_path / f"block{i}", env, None): block
                for i, block in enumerate(local)}
        (tmp_path / "server").mkdir()
        with serving(provider, tmp_path / "server") as url:
            runs.update({pool.submit(run_block, block, tmp_path / f"remote{i}", env, url): block
                         for i, block in enumerate(remote)})
            failures = {runs[run].name: run.result() for run in as_completed(runs)}
    failed = {name: problem for name, problem in failures.items() if problem}
    assert not failed, "\n\n".join(f"{name} {problem}" for name, problem in sorted(failed.items()))


# --- shell blocks: the commands they show exist ----------------------------------------------

def _commands() -> dict[tuple[str, ...], set[str]]:
    """Each command's path (``("agents", "list")``) and the options it takes."""
    commands: dict[tuple[str, ...], set[str]] = {}

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        commands[path] = {opt for param in command.params for opt in param.opts
                          if opt.startswith("-")} | {"--help"}
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return commands


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
    """Each ``stateloop`` command a shell block shows exists and takes the options shown;
    each ``make`` target exists."""
    commands, targets = _commands(), _make_targets()
    for words in _command_lines(block):
        named = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
        if words[0] == "make":
            assert set(named) <= targets, f"{block.name}: no make target in {words}"
            continue
        path: tuple[str, ...] = ()
        for word in named[:2]:
            alternatives = [(*path, name) for name in word.split("|")]
            if "|" in word:  # `stateloop agents list|create`: each is a command
                missing = [name for name in alternatives if name not in commands]
                assert not missing, f"{block.name}: no command {missing}"
            elif alternatives[0] not in commands:
                break  # an argument, not a command
            path = alternatives[0]
        assert path, f"{block.name}: no command in `{' '.join(words)}`"
        options = {word.split("=")[0] for word in words if word.startswith("-") and word != "-"}
        unknown = sorted(options - commands[path])
        assert not unknown, f"{block.name}: `stateloop {' '.join(path)}` takes no {unknown}"


# --- settings: every STATELOOP_* variable the docs name is read by the source ----------------

def test_every_setting_the_docs_name_exists() -> None:
    known = {f"STATELOOP_{name.upper()}" for name in ServerSettings.model_fields}
    for source in (ROOT / "src").rglob("*.py"):
        known |= set(re.findall(r"STATELOOP_[A-Z0-9_]+", source.read_text(encoding="utf-8")))
    named = {(page.relative_to(ROOT).as_posix(), setting) for page in PAGES
             for setting in re.findall(r"STATELOOP_[A-Z0-9_]+", page.read_text(encoding="utf-8"))}
    assert len(named) > 50
    unknown = sorted(pair for pair in named if pair[1] not in known)
    assert not unknown, f"settings no source reads: {unknown}"


def test_readme_links_lead_somewhere() -> None:
    """The site's build checks the links of docs/; the README is outside it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [target for target in targets if "://" not in target]
    assert len(local) > 10
    assert not [target for target in local if not (ROOT / target).exists()]
