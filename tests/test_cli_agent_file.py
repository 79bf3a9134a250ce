"""``stateloop import`` and ``stateloop export``: on the local database and on a server,
Letta's files go in and come out the same; a bad file is one error line, nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

from af_support import (
    FIXTURES,
    OVER_LIMIT,
    file_with,
    file_with_bad_items,
    normalised,
    over_limit_file,
)
from fake_script import Script
from stateloop.testing import call, reply
from test_cli_support import Cli, serving

pytest_plugins = ["test_cli_support"]  # fixtures: script, fake, cli


def test_import_then_export_round_trips_on_the_local_database(cli: Cli, tmp_path: Path) -> None:
    fixture = FIXTURES[0]
    done = cli("import", str(fixture))
    assert done.returncode == 0, done.stderr
    assert f"imported agent {fixture.stem}" in done.stdout
    exported = cli("export", fixture.stem)
    assert exported.returncode == 0, exported.stderr
    path = tmp_path / "again.af"
    path.write_text(exported.stdout)
    copy = cli.inline_json("import", str(path), "--name", "twin")
    assert copy["names"] == ["twin"]
    twin = cli.inline("export", "twin")
    assert twin.exit_code == 0, twin.output
    first, second = json.loads(exported.stdout), json.loads(twin.stdout)
    second["agents"][0]["name"] = first["agents"][0]["name"]
    assert normalised(first) == normalised(second)


def test_an_imported_agent_with_source_tools_runs_from_the_cli(cli: Cli, script: Script
                                                              ) -> None:
    fixture = FIXTURES[-1]  # outreach_workflow_agent: its tools come with source
    assert cli.inline("import", str(fixture)).exit_code == 0
    script.set(call("retrieve_candidate", candidate_name="Ada"), reply("Retrieved."))
    done = cli.inline("run", fixture.stem, "Evaluate Ada.", "--json")
    assert done.exit_code == 0, done.output
    assert "software engineer working at Letta" in done.stdout


def test_a_bad_file_is_one_error_line_and_nothing_is_stored(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.af"
    bad.write_text(FIXTURES[0].read_text()[:500])
    done = cli("import", str(bad))
    assert done.returncode == 2
    assert done.stderr.startswith("error:") and "not valid JSON" in done.stderr
    assert cli.inline_json("agents", "list") == []


def test_a_value_the_json_routes_refuse_is_one_error_line_naming_it_locally_and_remotely(
        cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.af"
    bad.write_bytes(file_with(("agents", 0, "max_tokens"), "NaN"))
    done = cli("import", str(bad))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: agents.0.max_tokens: numbers must be finite")
    assert cli.inline_json("agents", "list") == []
    with serving(cli) as url:
        remote = cli.inline("import", str(bad), "--server", url)
        assert remote.exit_code == 2, remote.output
        assert "agents.0.max_tokens: numbers must be finite" in remote.output
        listed = cli.inline("agents", "list", "--server", url, "--json")
        assert listed.exit_code == 0 and json.loads(listed.stdout) == [], listed.output


def test_import_and_export_through_a_server(cli: Cli) -> None:
    fixture = FIXTURES[-1]
    with serving(cli) as url:
        done = cli.inline("import", str(fixture), "--server", url)
        assert done.exit_code == 0, done.output
        assert f"imported agent {fixture.stem}" in done.stdout  # no _copy suffix
        exported = cli.inline("export", fixture.stem, "--server", url)
        assert exported.exit_code == 0, exported.output
    data = json.loads(exported.stdout)
    original = json.loads(json.loads(fixture.read_text()))
    assert [t["name"] for t in data["tools"]] == [
        t["name"] for t in sorted(original["tools"], key=lambda t: t["id"])]
    assert data["agents"][0]["tool_rules"] == original["agents"][0]["tool_rules"]


def test_a_letta_export_with_a_block_over_its_limit_imports_saying_so(cli: Cli,
                                                                     tmp_path: Path) -> None:
    path = tmp_path / "over.af"
    path.write_text(json.dumps(over_limit_file()))
    note = (f"note: block 'persona': its value has {OVER_LIMIT} characters, over its limit "
            f"of 10000; the value is kept and the limit raised to {OVER_LIMIT}")
    done = cli("import", str(path))
    assert done.returncode == 0, done.stderr
    assert note in " ".join(done.stderr.split())  # rich wraps long lines
    assert "imported agent memgpt_agent" in done.stdout
    with serving(cli) as url:
        remote = cli("import", str(path), "--server", url, "--json")
        assert remote.returncode == 0, remote.stderr
        assert json.loads(remote.stdout)["notes"] == [note.removeprefix("note: ")]


def test_what_cannot_be_imported_is_named_unless_strict(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.af"
    path.write_text(json.dumps(file_with_bad_items()))
    strict = cli("import", str(path), "--strict")
    assert strict.returncode == 2, strict.stderr
    assert strict.stderr.startswith("error: tools.3.source_code: tool 'broken': source_code "
                                    "does not compile")
    assert cli.inline_json("agents", "list") == []
    done = cli.inline_json("import", str(path))
    assert [n.split(" left out")[0] for n in done["notes"] if " left out" in n] == [
        "tool 'broken'", "blocks.2", "agent 'memgpt_agent': tool rule 0 (no_such_rule)",
        "agent 'memgpt_agent': tool 'tool-missing'", "agent 'memgpt_agent': block "
        "'block-missing'"]
    assert [a["name"] for a in cli.inline_json("agents", "list")] == ["memgpt_agent"]
