"""``stateloop import`` and ``stateloop export``: on the local database and on a server,
Letta's files go in and come out the same; a bad file is one error line, nothing stored."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from pathlib import Path

from af_support import (
    FIXTURES,
    OVER_LIMIT,
    file_with,
    file_with_bad_items,
    minimal_file,
    normalised,
    over_limit_file,
)
from fake_script import Script
from stateloop.testing import call, reply
from stateloop.testing.fake_openai import FakeOpenAI
from test_cli_support import Cli, cli, fake, script, serving  # noqa: F401 (fixtures)


def test_import_then_export_round_trips_on_the_local_database(cli: Cli, tmp_path: Path) -> None:
    fixture = FIXTURES[0]
    done = cli("import", str(fixture))
    assert done.returncode == 0, done.stderr
    assert f"imported agent {fixture.stem}_copy (agent-" in done.stdout  # as REST names it
    exported = cli("export", f"{fixture.stem}_copy")
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
    done = cli.inline("run", f"{fixture.stem}_copy", "Evaluate Ada.", "--json")
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
        assert f"imported agent {fixture.stem}_copy" in done.stdout  # as REST names it
        exported = cli.inline("export", f"{fixture.stem}_copy", "--server", url)
        assert exported.exit_code == 0, exported.output
    data = json.loads(exported.stdout)
    original = json.loads(json.loads(fixture.read_text()))
    assert [t["name"] for t in data["tools"]] == [
        t["name"] for t in sorted(original["tools"], key=lambda t: t["id"])]
    assert data["agents"][0]["tool_rules"] == original["agents"][0]["tool_rules"]


def test_an_import_next_to_its_original_is_a_copy_and_a_shared_name_is_never_guessed(
        cli: Cli, script: Script, tmp_path: Path) -> None:
    """Exported and imported into the same place, an agent comes back as NAME_copy (as REST
    imports it), locally and over a server; where two agents do share a name, a command
    naming it says so with their ids instead of picking one."""
    cli.create("ada")
    ada = cli.inline_json("agents", "show", "ada")["id"]
    exported = tmp_path / "ada.af"
    exported.write_text(cli("export", "ada").stdout)
    with serving(cli) as url:
        for where in ((), ("--server", url)):
            done = cli.inline("import", str(exported), *where)
            assert done.exit_code == 0, done.output
            assert "imported agent ada_copy (agent-" in done.stdout
    names = sorted(a["name"] for a in cli.inline_json("agents", "list"))
    assert names == ["ada", "ada_copy", "ada_copy"]
    script.set(reply("The original."))
    done = cli.inline("run", "ada", "hi")  # still the original, not a copy
    assert (done.exit_code, done.stdout) == (0, "The original.\n")
    assert cli.inline_json("agents", "show", ada)["messages_in_context"] == 3

    copies = [a["id"] for a in cli.inline_json("agents", "list") if a["name"] == "ada_copy"]
    with serving(cli) as url:
        for where in ((), ("--server", url)):
            for args in (("run", "ada_copy", "hi"), ("chat", "ada_copy"),
                         ("agents", "show", "ada_copy"), ("context", "ada_copy"),
                         ("export", "ada_copy")):
                refused = cli.inline(*args, *where, input="")
                assert refused.exit_code == 2, (args, where, refused.output)
                [line] = refused.stderr.strip().splitlines()[-1:]
                assert line.startswith("error: 2 agents are named 'ada_copy': "), line
                assert all(agent_id in line for agent_id in copies), line
                assert line.endswith("give the id of the one you mean")
    assert len(cli.inline_json("agents", "list")) == 3  # nothing made, nothing deleted
    by_id = cli.inline("agents", "show", copies[1])
    assert by_id.exit_code == 0 and copies[1] in by_id.stdout


def test_an_imported_agent_whose_model_cannot_be_called_names_the_cli_options(
        cli: Cli, script: Script, fake: FakeOpenAI, tmp_path: Path) -> None:
    """A Letta file whose agent ran on Ollama: the import note and the run's error name
    OLLAMA_BASE_URL, the run's error --base-url (the CLI's option) too, and with it the agent
    runs."""
    path = tmp_path / "ollama.af"
    path.write_text(json.dumps(minimal_file(llm_config={
        "model": "llama3.1:8b", "model_endpoint_type": "ollama", "context_window": 32000})))
    done = cli.inline("import", str(path), "--name", "local")
    assert done.exit_code == 0, done.output
    assert "model 'ollama/llama3.1:8b' kept, but its provider is not configured" in done.stderr
    assert "set OLLAMA_BASE_URL" in done.stderr
    refused = cli.inline("run", "local", "hi")
    assert refused.exit_code == 3
    assert "set OLLAMA_BASE_URL to use ollama/ models" in refused.stderr
    assert "--model openai/llama3.1:8b with --base-url URL" in refused.stderr
    script.set(reply("Local."))
    ran = cli.inline("run", "local", "hi", "--model", "openai/llama3.1:8b", "--base-url",
                     fake.base_url)
    assert (ran.exit_code, ran.stdout) == (0, "Local.\n"), ran.output


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
        "tool 'broken'", "blocks.2", "agent 'memgpt_agent_copy': tool rule 0 (no_such_rule)",
        "agent 'memgpt_agent_copy': tool 'tool-missing'", "agent 'memgpt_agent_copy': block "
        "'block-missing'"]
    assert [a["name"] for a in cli.inline_json("agents", "list")] == ["memgpt_agent_copy"]
