"""The numbered semantics again, through letta-client 1.7.12 (the version Letta 0.16.8
locks; the other tests use 1.12.1): tests/letta17_walk.py runs under ``.venv-letta17``
(``make .venv-letta17/.installed``, which ``make test`` runs; built here when missing)
against a real server on loopback, and asks this test for the model's answers over its
stdin and stdout.

Where the two clients differ, for these items (their method signatures compared):
- tools: 1.7.x has ``tools.upsert_from_function(func, args_schema=...)``,
  ``create_from_function`` and ``add``; 1.12 dropped them (apps send ``upsert(source_code=,
  args_json_schema=)``, as test_server_tool_returns does). The walk uses the 1.7.x helpers.
- agents.create: 1.7.x takes ``include_multi_agent_tools``; in 1.12 it is an extra body key.
- agents.messages.create / create_async / stream: 1.12 adds ``override_system``.
- agents.messages.list: 1.12 adds ``include_return_message_types``.
- runs.messages.stream: 1.7.x names the path parameter ``run_id``; 1.12 ``path_run_id``
  (with ``body_run_id`` and ``otid``).
Paging, agent types, client tools, parallel calls, approvals, agent fields, message identity,
block rename, validation and errors are the same calls in both.
"""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from patience import STOPS
from stateloop.testing.fake_openai import load_script
from test_server_support import Script, Server, client, fake, script, server  # noqa: F401 (fixtures)

VERSION = "1.7.12"
ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-letta17"
PYTHON = VENV / "bin" / "python"
WALK = Path(__file__).with_name("letta17_walk.py")
ITEMS = ["1 paging", "2 agent types", "4 parallel calls are one message", "3 client tools",
         "5 approvals per agent", "6 tool returns", "7 agents", "8 message identity",
         "9 block rename", "10 validation", "10 approval errors", "11 plain REST errors"]


def _installed() -> bool:
    if not PYTHON.exists():
        return False
    found = subprocess.run([PYTHON, "-c", "import letta_client; print(letta_client.__version__)"],
                           capture_output=True, text=True, env=_env())
    return found.stdout.strip() == VERSION


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def letta17() -> Path:
    """The interpreter with letta-client 1.7.12, built as the Makefile builds it."""
    if not _installed():
        steps = [[sys.executable, "-m", "venv", "--clear", str(VENV)],
                 [str(PYTHON), "-m", "pip", "install", "--quiet", f"letta-client=={VERSION}"]]
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=300,
                                      env=_env())
            except subprocess.TimeoutExpired:
                pytest.skip(f"building {VENV.name} timed out: {' '.join(step)}")
            if done.returncode != 0:
                pytest.skip(f"cannot build {VENV.name} (letta-client {VERSION}): "
                            f"{done.stderr.strip()[-300:]}")
    return PYTHON


def test_letta_client_1_7_walks_every_item(letta17: Path, server: Server,
                                           script: Script) -> None:
    walk = subprocess.Popen([letta17, str(WALK), server.url], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), cwd=WALK.parent)
    assert walk.stdin is not None and walk.stdout is not None and walk.stderr is not None
    watchdog = threading.Timer(120, walk.kill)  # a hung walk fails, not the whole suite
    watchdog.start()
    passed: list[str] = []
    try:
        for line in walk.stdout:
            if line.startswith("SCRIPT "):
                script.set(*load_script(json.loads(line.removeprefix("SCRIPT "))))
                walk.stdin.write("ok\n")
                walk.stdin.flush()
            elif line.startswith("PASS "):
                passed.append(line.removeprefix("PASS ").strip())
            elif line.strip() == "DONE":
                passed.append("DONE")
        errors = walk.stderr.read()
        code = walk.wait(timeout=STOPS)
    finally:
        watchdog.cancel()
        walk.kill()
    assert code == 0, f"the 1.7 walk failed after {passed}:\n{errors[-3000:]}"
    assert passed == [*ITEMS, "DONE"]
