"""``make run`` (``stateloop up``) and ``stateloop serve`` print the web page's address."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from test_cli_server import run_up
from test_cli_support import Cli, cli, fake, free_port, script  # noqa: F401 (fixtures)


def test_up_prints_the_web_pages_address(cli: Cli) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    _, output = run_up(cli, "--port", str(port), port=port)
    assert f"web page: {url}  (agents, memory, context, runs)" in output
