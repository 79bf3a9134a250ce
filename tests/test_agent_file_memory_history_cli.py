"""``stateloop export --memory-history``: on the local database and through a server, the
file carries the memory's commits, and ``stateloop import`` keeps them (same shas)."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from pathlib import Path

from stateloop import Agent, Block
from stateloop.agent_file.memory_history import HISTORY_KEY
from stateloop.testing import ScriptedModel, call, reply
from test_cli_support import Cli, cli, fake, script, serving  # noqa: F401 (fixtures)


def test_export_with_memory_history_round_trips_locally_and_through_a_server(
        cli: Cli, tmp_path: Path) -> None:
    url = f"sqlite:///{cli.db}"
    model = ScriptedModel([call("core_memory_append", label="human", content="Likes tea."),
                           reply("ok")])
    ada = Agent(model=model, system="sys", name="ada", store=url,
                tools=["core_memory_append"], blocks=[Block("human", "Name: Ann")])
    ada.run_sync("remember")
    shas = [c.sha for c in ada.memory_history()]
    assert len(shas) == 2

    plain = json.loads(cli.inline("export", "ada").stdout)
    assert HISTORY_KEY not in plain
    local = cli.inline("export", "ada", "--memory-history")
    assert local.exit_code == 0, local.output
    assert json.loads(local.stdout)[HISTORY_KEY][0]["head"] == shas[0]
    path = tmp_path / "ada.af"
    path.write_text(local.stdout)
    assert cli.inline_json("import", str(path), "--name", "twin")["names"] == ["twin"]
    twin = Agent.load("twin", store=url, model=ScriptedModel([]))
    assert [c.sha for c in twin.memory_history()] == shas

    with serving(cli) as server:
        remote = cli.inline("export", "twin", "--memory-history", "--server", server)
        assert remote.exit_code == 0, remote.output
    entry = json.loads(remote.stdout)[HISTORY_KEY][0]
    assert [c["sha"] for c in entry["commits"]] == shas[::-1]
