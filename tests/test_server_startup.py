"""What ``stateloop serve`` refuses to start with: misset secrets, and an open server on the
network. Settings directly, then the real command in a subprocess."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import subprocess

import httpx
import pytest
from pydantic import ValidationError

from stateloop.errors import ConfigError
from stateloop.server import serve
from stateloop.server.exposure import is_loopback
from stateloop.server.settings import ServerSettings
from test_cli_support import Cli, cli, fake, free_port, script, serving  # noqa: F401 (fixtures)


@pytest.fixture(autouse=True)
def no_server_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STATELOOP_SERVER_PASSWORD", "STATELOOP_API_KEYS", "STATELOOP_HOST"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("STATELOOP_SERVER_PASSWORD", "", "STATELOOP_SERVER_PASSWORD is set but empty"),
    ("STATELOOP_SERVER_PASSWORD", "   ", "STATELOOP_SERVER_PASSWORD is set but empty"),
    ("STATELOOP_SERVER_PASSWORD", " hunter2 ", "STATELOOP_SERVER_PASSWORD starts or ends "
                                               "with whitespace"),
    ("STATELOOP_SERVER_PASSWORD", "hunter2\n", "STATELOOP_SERVER_PASSWORD starts or ends "
                                               "with whitespace"),
    ("STATELOOP_API_KEYS", "", "STATELOOP_API_KEYS is set but empty"),
    ("STATELOOP_API_KEYS", " , ", "STATELOOP_API_KEYS is set but empty"),
    ("STATELOOP_API_KEYS", "key-1,,key-2", "STATELOOP_API_KEYS: key 2 is empty"),
    ("STATELOOP_API_KEYS", "key-1,\tkey-2", "STATELOOP_API_KEYS: key 2 starts or ends with "
                                            "whitespace"),
])
def test_a_secret_that_is_set_must_be_one(monkeypatch: pytest.MonkeyPatch, variable: str,
                                          value: str, says: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as refused:
        ServerSettings()
    assert says in str(refused.value)
    for secret in ("hunter2", "key-1", "key-2"):
        assert secret not in str(refused.value)  # a secret is never echoed


def test_secrets_that_are_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ServerSettings().tokens() == set()  # unset: no authentication, as before
    monkeypatch.setenv("STATELOOP_SERVER_PASSWORD", "hunter2")
    monkeypatch.setenv("STATELOOP_API_KEYS", "key-1, key-2")
    assert ServerSettings().tokens() == {"hunter2", "key-1", "key-2"}
    with pytest.raises(ValidationError, match="is set but empty"):
        ServerSettings(server_password="")


def test_loopback_addresses() -> None:
    for host in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LocalHost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "example.com", ""):
        assert not is_loopback(host), host


def test_serve_refuses_the_network_without_auth_before_binding() -> None:
    with pytest.raises(ConfigError, match=r"refusing to serve on 0\.0\.0\.0 without auth"):
        serve("0.0.0.0", free_port(), settings=ServerSettings(database_url="sqlite:///unused"))


def refused(cli: Cli, *args: str, env: dict[str, str | None] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """The command run for real; it must end at once (a server that started would not)."""
    done = cli(*args, timeout=30, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.mark.parametrize(("value", "says"), [
    ("", "error: STATELOOP_SERVER_PASSWORD is set but empty: unset it to run without "
         "authentication, or set a password"),
    (" hunter2", "error: STATELOOP_SERVER_PASSWORD starts or ends with whitespace"),
])
def test_the_cli_refuses_a_misset_password(cli: Cli, value: str, says: str) -> None:
    done = refused(cli, "serve", "--port", str(free_port()),
                   env={"STATELOOP_SERVER_PASSWORD": value})
    assert done.returncode == 2
    assert says in " ".join(done.stderr.split())
    assert "hunter2" not in done.stderr


def test_the_cli_refuses_empty_api_keys(cli: Cli) -> None:
    done = refused(cli, "serve", "--port", str(free_port()), env={"STATELOOP_API_KEYS": " "})
    assert done.returncode == 2
    assert "STATELOOP_API_KEYS is set but empty" in done.stderr


def test_the_cli_refuses_the_network_without_auth(cli: Cli) -> None:
    done = refused(cli, "serve", "--host", "0.0.0.0", "--port", str(free_port()))
    assert done.returncode == 3
    message = " ".join(done.stderr.split())
    assert "refusing to serve on 0.0.0.0 without authentication" in message
    assert "--insecure" in message
    # The host from the environment too; and `up` creates nothing before refusing.
    done = refused(cli, "up", "--port", str(free_port()), env={"STATELOOP_HOST": "::"})
    assert done.returncode == 3 and "refusing to serve on ::" in done.stderr
    assert not cli.db.exists()


def test_the_network_with_a_password_or_insecure(cli: Cli) -> None:
    with serving(cli, "--host", "0.0.0.0", env={"STATELOOP_SERVER_PASSWORD": "hunter2"}) as url:
        assert httpx.get(f"{url}/v1/agents").status_code == 401
        authorized = httpx.get(f"{url}/v1/agents", headers={"Authorization": "Bearer hunter2"})
        assert authorized.status_code == 200
    with serving(cli, "--host", "0.0.0.0", "--insecure", env={}) as url:
        assert httpx.get(f"{url}/v1/agents").status_code == 200
