"""Shared harness for the CLI tests: the real ``stateloop`` console script in a subprocess,
a fake OpenAI-compatible server in this process, a temporary database and HOME."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from fake_script import Script
from started import stop, wait_until_healthy
from stateloop.llm.providers import CATALOGUE
from stateloop.testing.fake_openai import FakeOpenAI

_OURS = ("STATELOOP_", "OPENAI_", "ANTHROPIC_")  # the variables the CLI reads


def console_script() -> list[str]:
    """The installed ``stateloop`` script next to this interpreter, else ``python -m``."""
    script = Path(sys.executable).parent / "stateloop"
    return [str(script)] if script.exists() else [sys.executable, "-m", "stateloop"]


@dataclass
class Cli:
    """Runs ``stateloop ...`` with an environment that points at the fake and the db."""

    env: dict[str, str]
    db: Path

    def __call__(self, *args: str, input: str | None = None, timeout: float = 120,
                 env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*console_script(), *args], input=input, capture_output=True,
                              text=True, timeout=timeout, env=self.environment(env))

    def environment(self, changes: dict[str, str | None] | None = None) -> dict[str, str]:
        merged = dict(self.env)
        for key, value in (changes or {}).items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return merged

    def json(self, *args: str) -> Any:
        done = self(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def inline(self, *args: str, input: str | bytes | None = None,
               env: dict[str, str | None] | None = None) -> Result:
        """The same command run in this process: for setup and details, without the second
        of imports each new process pays."""
        from stateloop.cli.app import app

        wanted = self.environment(env)
        changes: dict[str, str | None] = {k: None for k in os.environ if k.startswith(_OURS)}
        changes.update({k: v for k, v in wanted.items() if k.startswith(_OURS)})
        return CliRunner().invoke(app, list(args), input=input, env=changes,
                                  catch_exceptions=False)

    def inline_json(self, *args: str) -> Any:
        done = self.inline(*args, "--json")
        assert done.exit_code == 0, done.output
        return json.loads(done.stdout)

    def create(self, name: str = "ada", *options: str) -> None:
        """``stateloop agents create NAME OPTIONS`` (in this process)."""
        done = self.inline("agents", "create", name, *options)
        assert done.exit_code == 0, done.output


def base_env(home: Path) -> dict[str, str]:
    """This environment without provider or stateloop settings, with HOME in ``home``."""
    providers = {variable for provider in CATALOGUE.values() for variable in provider.variables}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STATELOOP_", "OPENAI_", "ANTHROPIC_")) and k not in providers}
    env.update(HOME=str(home), TERM="dumb", NO_COLOR="1", PYTHONUNBUFFERED="1")
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(cli: Cli, *args: str, env: dict[str, str | None] | None = None) -> Iterator[str]:
    """``stateloop serve ARGS`` running; yields its URL on loopback."""
    port = free_port()
    log = cli.db.with_name(f"serve-{port}.log")  # a file: a pipe nobody reads would fill
    with log.open("w") as output:
        process = subprocess.Popen([*console_script(), "serve", "--port", str(port), *args],
                                   env=cli.environment(env), stdout=output,
                                   stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, process, log.read_text)
        yield url
    finally:
        stop(process)


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def fake(script: Script) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(script) as server:
        yield server


@pytest.fixture
def cli(fake: FakeOpenAI, script: Script, tmp_path: Path) -> Cli:
    script.set()
    db = tmp_path / "agents.db"
    env = base_env(tmp_path)
    env.update(STATELOOP_DATABASE_URL=f"sqlite:///{db}", OPENAI_BASE_URL=fake.base_url,
               OPENAI_API_KEY="test-key")
    return Cli(env, db)
