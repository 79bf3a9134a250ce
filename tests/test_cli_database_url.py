"""A database URL's password never reaches output: ``serve``, ``agents list``, ``run`` and
``migrate`` name a database they cannot open without it, driver messages included. The URL
may come from ``STATELOOP_DATABASE_URL_FILE`` (or the environment), so ``ps`` shows neither;
``--db`` with a password says so."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from letta_client import Letta
from sqlalchemy import make_url

from patience import STARTS, STOPS
from stateloop.store.url import hide_password, resolve_url
from test_cli_support import Cli, cli, console_script, fake, free_port, script  # noqa: F401 (fixtures)

PASSWORD = "s3cret-Pw"
REFUSED = f"postgresql://ada:{PASSWORD}@127.0.0.1:1/agents"  # nothing listens on port 1
SHOWN = "postgresql://ada:***@127.0.0.1:1/agents"


@pytest.mark.parametrize("command", [
    ("serve", "--port", "0"), ("agents", "list"), ("run", "ada", "hello"), ("migrate",)])
def test_an_unreachable_database_is_named_without_its_password(
        cli: Cli, command: tuple[str, ...]) -> None:
    if command[0] == "serve":
        command = ("serve", "--port", str(free_port()))
    done = cli(*command, "--db", REFUSED, timeout=60)
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert PASSWORD not in output and "Traceback" not in output
    assert f"error: cannot open database '{SHOWN}': connection failed" in done.stderr
    assert "warning: the password in --db shows in ps" in done.stderr


@pytest.mark.parametrize(("url", "problem"), [
    (f"postgresql://ada:{PASSWORD}@/agents?host=/nowhere&port=abc", "non-integer port"),
    (f"postgresql://ada:{PASSWORD}@host:abc/agents", "invalid literal for int()"),
    (f"postgresql://ada:{PASSWORD}@127.0.0.1:1/agents?sslmode={PASSWORD}", "sslmode value"),
    (f"postgresql://ada:{PASSWORD}@127.0.0.1:1/agents?nonsense=1", "nonsense"),
    (f"postgresql+asyncpg://ada:{PASSWORD}@127.0.0.1/agents", "unsupported PostgreSQL"),
    (f"mysql://ada:{PASSWORD}@127.0.0.1/agents", "unsupported scheme"),
    (f"postgresql://ada:{PASSWORD.replace('-', '%zz')}@127.0.0.1:1/agents", "failed"),
    (f"postgresql://ada@127.0.0.1:1/agents?password={PASSWORD}", "failed"),
])
def test_a_malformed_url_is_named_without_its_password(cli: Cli, url: str,
                                                       problem: str) -> None:
    for command in (("agents", "list"), ("migrate",), ("serve", "--port", str(free_port()))):
        done = cli.inline(*command, env={"STATELOOP_DATABASE_URL": url})
        assert done.exit_code == 3, (command, done.output)
        secret = PASSWORD.replace("-", "%zz") if "%zz" in url else PASSWORD
        assert secret not in done.output and PASSWORD not in done.output
        assert "error: cannot open database '" in done.output and problem in done.output
        assert "***" in done.output


def test_a_drivers_message_that_quotes_the_password_is_scrubbed() -> None:
    url = resolve_url(f"postgresql://ada:{PASSWORD.replace('-', '%2D')}@db/agents")
    message = f'invalid value "{PASSWORD}" ({url.raw}, "{PASSWORD.replace("-", "%2D")}")'
    assert url.scrub(message) == 'invalid value "***" (postgresql://ada:***@db/agents, "***")'
    assert PASSWORD not in repr(url) and PASSWORD not in str(url.error(message))
    assert hide_password(f"postgresql://ada:p@ss/w{PASSWORD}@db/agents?password=x&a=b") == (
        "postgresql://ada:***@db/agents?password=***&a=b")
    assert hide_password("postgresql://db:5432/agents") == "postgresql://db:5432/agents"


def test_the_url_comes_from_a_file_and_ps_shows_no_password(
        cli: Cli, pg_database: Callable[..., str], tmp_path: Path) -> None:
    # The test server trusts local connections: the password is carried, not checked.
    url = make_url(pg_database()).set(password=PASSWORD).render_as_string(hide_password=False)
    secret = tmp_path / "database-url"
    secret.write_text(url + "\n")
    env: dict[str, str | None] = {"STATELOOP_DATABASE_URL": None,
                                  "STATELOOP_DATABASE_URL_FILE": str(secret)}
    created = cli("agents", "create", "ada", env=env)
    assert created.returncode == 0 and PASSWORD not in created.stdout + created.stderr
    assert "warning" not in created.stderr

    port = free_port()
    server = subprocess.Popen([*console_script(), "serve", "--port", str(port)],
                              env=cli.environment(env), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + STARTS
        while server.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/ready", timeout=5).is_success:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        command_line = Path(f"/proc/{server.pid}/cmdline").read_bytes()
        assert PASSWORD.encode() not in command_line and b"postgresql" not in command_line
        client = Letta(base_url=f"http://127.0.0.1:{port}", max_retries=0, timeout=30)
        assert [a.name for a in client.agents.list().items] == ["ada"]
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=STOPS)
    assert PASSWORD not in output


def test_an_unreadable_or_empty_url_file_is_named(cli: Cli, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for path, problem in ((tmp_path / "missing", "No such file or directory"),
                          (empty, "is empty")):
        done = cli.inline("agents", "list", env={"STATELOOP_DATABASE_URL": None,
                                                 "STATELOOP_DATABASE_URL_FILE": str(path)})
        assert done.exit_code == 3, done.output
        assert done.output.startswith("error: STATELOOP_DATABASE_URL_FILE: ")
        assert repr(str(path)) in done.output and problem in done.output
