"""The ``stateloop`` command in local mode: the real console script against a temporary
database and the fake OpenAI-compatible server. (Each run of the script costs about a
second of imports, so setup runs the same command in-process and scenarios are merged.)"""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from patience import STARTS
from stateloop.llm.base import ModelRequest
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import ScriptItem, call, error, reply
from test_cli_support import Cli, Script, cli, console_script, fake, script  # noqa: F401 (fixtures)

NO_PROVIDER: dict[str, str | None] = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_help_names_the_commands_and_exit_codes(cli: Cli) -> None:
    done = cli("--help")
    assert done.returncode == 0
    for word in ("chat", "run", "context", "serve", "agents", "Exit codes", "130"):
        assert word in done.stdout


def test_import_stateloop_leaves_typer_and_rich_out() -> None:
    code = ("import sys, stateloop; "
            "print(sorted(m for m in ('typer', 'rich', 'click') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_agents_create_list_show_delete(cli: Cli) -> None:
    done = cli("agents", "create", "ada", "--block", "human=Ada, a mathematician", "--tag",
               "demo", "--system", "You are terse.")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("created agent ada (agent-")
    cli.create("bob")

    listed = cli.json("agents", "list")
    assert [a["name"] for a in listed] == ["ada", "bob"]
    assert listed[0]["tags"] == ["demo"] and listed[0]["model"] == "openai/gpt-4o-mini"
    shown = cli.inline_json("agents", "show", "ada")
    assert shown["id"] == listed[0]["id"] and shown["system"] == "You are terse."
    assert [(b["label"], b["value"]) for b in shown["blocks"]] == [
        ("human", "Ada, a mathematician")]

    done = cli("agents", "delete", "bob", "--yes")
    assert (done.returncode, done.stdout) == (0, f"deleted agent bob ({listed[1]['id']})\n")
    assert [a["name"] for a in cli.inline_json("agents", "list")] == ["ada"]


def test_every_agent_type_can_be_created_and_an_unknown_one_is_named(cli: Cli) -> None:
    from stateloop.agent_types import AGENT_TYPES

    assert "voice_convo_agent" in cli.inline("agents", "create", "--help").output
    for number, name in enumerate(AGENT_TYPES):
        cli.create(f"agent{number}", "--agent-type", name)
        assert cli.inline_json("agents", "show", f"agent{number}")["agent_type"] == name
    unknown = cli.inline("agents", "create", "eve", "--agent-type", "chat_agent")
    assert unknown.exit_code == 2 and "chat_agent" in unknown.output, unknown.output


def test_agents_details(cli: Cli) -> None:
    """Text output, filters and refusals (in-process: the same code, without the startup)."""
    unreadable = cli.inline("agents", "create", "ada", "--block", "persona=@/nonexistent")
    assert unreadable.exit_code == 2 and "cannot read '/nonexistent'" in unreadable.stderr
    assert cli.inline_json("agents", "list") == []  # nothing was created
    cli.create("ada", "--tag", "demo", "--block", "human=Ada")
    cli.create("bob")
    table = cli.inline("agents", "list", "--tag", "demo").stdout.splitlines()
    assert table[0].split() == ["NAME", "ID", "MODEL", "TAGS", "CREATED"]
    assert [row.split()[0] for row in table[1:]] == ["ada"]
    text = cli.inline("agents", "show", "ada").stdout
    assert "Ada" in text and "openai/gpt-4o-mini" in text and "memory_insert" in text

    duplicate = cli.inline("agents", "create", "ada")
    assert duplicate.exit_code == 2
    assert error_lines(duplicate.stderr)[0].startswith("error: an agent named 'ada' already")
    bad = cli.inline("agents", "create", "eve", "--block", "no-equals-sign")
    assert bad.exit_code == 2 and "LABEL=VALUE" in bad.stderr
    refused = cli.inline("agents", "delete", "ada", input="")
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert cli.inline("agents", "delete", "nobody", "--yes").exit_code == 2
    assert [a["name"] for a in cli.inline_json("agents", "list")] == ["ada", "bob"]


def context_rows(view: str) -> list[tuple[int, str, str, int, str]]:
    """The message rows of the context view: index, role, kind, tokens, content."""
    rows = []
    for line in view.splitlines():
        if line[:4].strip().isdigit():  # "{index:>4}  {role:<9} {kind:<11} {tokens:>7}  ..."
            rows.append((int(line[:4]), line[6:15].strip(), line[16:27].strip(),
                         int(line[28:35]), line[37:]))
    return rows


def test_run_prints_the_answer_and_tool_calls(cli: Cli, script: Script) -> None:
    cli.create("ada")
    script.set(reply("Hello, Ada."))
    first = cli.inline("run", "ada", "hi")
    assert (first.exit_code, first.stdout) == (0, "Hello, Ada.\n")

    # The conversation is persisted; '-' reads the message from standard input.
    script.set(call("memory_insert", label="human", new_string="Likes tea"), reply("Noted."))
    done = cli("run", "ada", "-", input="I like tea\n")
    assert (done.returncode, done.stdout, error_lines(done.stderr)) == (0, "Noted.\n", [])
    assert '→ memory_insert(label="human", new_string="Likes tea")' in done.stderr
    assert "← Inserted into memory block 'human'" in done.stderr
    assert [m.text for m in script.requests[0].messages[1:]] == [
        "hi", "Hello, Ada.", "I like tea"]

    # The context view needs no provider: it only counts.
    done = cli("context", "ada", env=NO_PROVIDER)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("context window: ") and "of 128000 tokens" in lines[0]
    rows = context_rows(done.stdout)
    assert [(role, kind) for _, role, kind, _, _ in rows] == [
        ("system", "system"), ("user", "message"), ("assistant", "message"),
        ("user", "message"), ("assistant", "tool call"), ("tool", "tool result"),
        ("assistant", "message")]
    assert rows[1][4] == "hi" and rows[4][4].startswith("memory_insert(")
    assert all(tokens > 0 for _, _, _, tokens, _ in rows)
    # One total, above and below: the messages and the tool schemas they are sent with.
    data = cli.inline_json("context", "ada")
    assert data["context_window_size_max"] == 128000 and data["num_messages"] == 7
    used = data["context_window_size_current"]
    assert used > sum(row[3] for row in rows)  # the tool schemas are counted too
    share = f"{used} of 128000 tokens ({100 * used / 128000:.1f}%)"
    assert lines[0] == f"context window: {share}"
    assert lines[-1].startswith(f"total {share}: the messages above and "
                                f"{data['num_tokens_functions_definitions']} tokens of tool")


def test_run_json_streams_one_message_a_line_as_they_happen(cli: Cli, script: Script) -> None:
    cli.create("ada")
    release = threading.Event()

    def held_reply(request: ModelRequest) -> ScriptItem:
        release.wait(STARTS)  # until the test has read the first step's messages
        return reply("Done.")

    script.set(call("memory_insert", label="human", new_string="x"), held_reply)
    process = subprocess.Popen([*console_script(), "run", "ada", "go", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=cli.environment())
    try:
        assert process.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + STARTS  # the process starts first
        while "tool_return_message" not in seen and time.monotonic() < deadline:
            seen.append(json.loads(process.stdout.readline())["message_type"])
        assert "tool_return_message" in seen and not release.is_set()  # the run is not over
        release.set()
        rest = [json.loads(line) for line in process.stdout]
        assert process.wait(15) == 0
    finally:
        release.set()
        process.kill()
        process.wait()
    # Letta's messages, as a server streams them (the same with --server: test_cli_server).
    assert seen[0] == "tool_call_message"
    assert [frame["message_type"] for frame in rest][-2:] == ["stop_reason", "usage_statistics"]
    assert rest[-2]["stop_reason"] == "end_turn"
    assert "".join(f["content"] for f in rest if f["message_type"] == "assistant_message") == (
        "Done.")


def test_run_failure_exits_1_with_one_error_line(cli: Cli, script: Script) -> None:
    cli.create("ada")
    script.set(*[error("invalid_request", "model 'gpt-4o-mini' does not exist")] * 2)
    done = cli("run", "ada", "hi")
    assert done.returncode == 1
    [line] = error_lines(done.stderr)
    assert line.startswith("error: run failed (llm_api_error)") and "does not exist" in line
    again = cli.inline("run", "ada", "hi again", "--json")  # same code; run_end on stdout
    frames = {f["message_type"]: f for f in map(json.loads, again.stdout.splitlines())}
    assert again.exit_code == 1 and frames["stop_reason"]["stop_reason"] == "llm_api_error"
    assert "does not exist" in frames["error_message"]["message"]


def test_unknown_agent_and_bad_options_exit_2(cli: Cli) -> None:
    expected = ["error: agent with id or name 'nobody' not found "
                "(`stateloop agents list` shows the agents)"]
    done = cli("run", "nobody", "hi")
    assert (done.returncode, error_lines(done.stderr)) == (2, expected)
    for args in (["context", "nobody"], ["agents", "show", "nobody"], ["chat", "nobody"]):
        result = cli.inline(*args, input="")
        assert (result.exit_code, error_lines(result.stderr)) == (2, expected), args
    assert cli("run", "ada", "hi", "--no-such-option").returncode == 2
    assert cli.inline("agents", "frobnicate").exit_code == 2
    assert cli.inline("run", "ada", input="").exit_code == 2  # no message
    assert cli.inline("run", "ada", "--approve", "--deny", "no").exit_code == 2


def test_missing_provider_says_what_to_set_and_exits_3(cli: Cli, script: Script,
                                                       fake: FakeOpenAI) -> None:
    cli.create("ada")
    done = cli("run", "ada", "hi", env=NO_PROVIDER)
    assert done.returncode == 3
    [line] = error_lines(done.stderr)
    assert "OPENAI_API_KEY" in line and "OPENAI_BASE_URL" in line and "--base-url" in line
    for word in ("vLLM", "Ollama", "llama.cpp", "LM Studio", "--model openai/"):
        assert word in done.stderr
    assert script.requests == []  # nothing was sent

    # A base URL is enough for a local server (no key), and --model picks its model.
    script.set(reply("Local."))
    local = cli.inline("run", "ada", "hi", "--base-url", fake.base_url,
                       "--model", "openai/llama3.1:8b", env=NO_PROVIDER)
    assert (local.exit_code, local.stdout) == (0, "Local.\n")
    assert fake.requests[-1].body["model"] == "llama3.1:8b"


def test_approvals_pause_the_run_and_resume_it(cli: Cli, script: Script) -> None:
    cli.create("ada", "--approve", "memory_insert")
    script.set(call("memory_insert", label="human", new_string="Likes tea"), reply("Noted."))
    done = cli("run", "ada", "I like tea")
    assert done.returncode == 4 and "waiting for approval: memory_insert(" in done.stderr

    busy = cli.inline("run", "ada", "something else")
    assert busy.exit_code == 4 and "--approve" in error_lines(busy.stderr)[0]
    assert cli.inline_json("agents", "show", "ada")["pending_approval"] is True

    resumed = cli.inline("run", "ada", "--approve")
    assert (resumed.exit_code, resumed.stdout) == (0, "Noted.\n")
    shown = cli.inline_json("agents", "show", "ada")
    assert shown["blocks"][0]["value"] == "Likes tea" and shown["pending_approval"] is False

    # --deny with a message: the denial goes to the model first, then the message.
    script.set(call("memory_insert", label="human", new_string="Dislikes tea"),
               reply("OK, I will not."), reply("Next answer."))
    assert cli.inline("run", "ada", "I dislike tea").exit_code == 4
    denied = cli.inline("run", "ada", "next", "--deny", "not now")
    assert (denied.exit_code, denied.stdout) == (0, "OK, I will not.\nNext answer.\n")
    assert "request to call tool denied. User reason: not now" in denied.stderr
    assert cli.inline_json("agents", "show", "ada")["blocks"][0]["value"] == "Likes tea"


def test_chat_from_a_pipe(cli: Cli, script: Script) -> None:
    cli.create("ada", "--block", "human=Ada")
    script.set(reply("Hi Ada! :smile:", reasoning="A greeting; answer warmly."))
    done = cli("chat", "ada", input="hello\n/memory\n/reset\n/frob\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "  thinking: A greeting; answer warmly.\nada> Hi Ada! :smile:\n" in done.stdout
    assert "[human]\nAda" in done.stdout and "conversation cleared" in done.stdout
    assert "unknown command /frob" in done.stderr
    assert cli.inline_json("context", "ada")["num_messages"] == 1  # the reset was saved


def test_chat_without_agent_talks_to_the_assistant(cli: Cli, script: Script) -> None:
    """The agent `stateloop up` (make run) makes ready; created on first use if missing."""
    script.set(reply("Hello."), reply("Again."))
    done = cli.inline("chat", input="hi\n")  # end of input leaves, like Ctrl-D
    assert done.exit_code == 0, done.stderr
    assert "created agent assistant" in done.stderr and "assistant> Hello." in done.stdout
    assert cli.inline_json("agents", "show", "assistant")["model"] == "openai/gpt-4o-mini"
    again = cli.inline("chat", input="hi\n")
    assert again.exit_code == 0 and "created" not in again.stderr
    assert [a["name"] for a in cli.inline_json("agents", "list")] == ["assistant"]


def test_version_is_printed(cli: Cli) -> None:
    from stateloop import __version__

    done = cli("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"stateloop {__version__}\n", "")


def test_help_of_serve_up_and_create_says_what_the_options_do(cli: Cli) -> None:
    for command, wanted in ((("serve",), "Model of agents created over the API without one"),
                            (("up",), "Model of the ready agent"),
                            (("agents", "create"), "lets names repeat")):
        done = cli.inline(*command, "--help")
        text = " ".join(done.stdout.replace("│", " ").split())  # the words, unwrapped
        assert done.exit_code == 0 and wanted in text, text
        assert "demo/echo" in text or command == ("agents", "create")
        assert "A unique name" not in text and "the agent up makes" not in text


def test_agents_list_pages(cli: Cli) -> None:
    """A page at a time: --limit (50 by default), then --after the last id it showed."""
    for name in ("ada", "bob", "cy", "dee", "eve"):
        cli.create(name)
    first = cli.inline("agents", "list", "--limit", "2", "--json")
    assert [a["name"] for a in json.loads(first.stdout)] == ["ada", "bob"]
    last_id = json.loads(first.stdout)[-1]["id"]
    assert f"2 agents shown; the next ones: --after {last_id}" in first.stderr
    second = cli.inline("agents", "list", "--limit", "2", "--after", last_id)
    assert [row.split()[0] for row in second.stdout.splitlines()[1:]] == ["cy", "dee"]
    rest = cli.inline("agents", "list", "--after", last_id, "--json")
    assert [a["name"] for a in json.loads(rest.stdout)] == ["cy", "dee", "eve"]
    assert "shown" not in rest.stderr  # nothing after the page: no hint
    done = cli.inline("agents", "list", "--after", json.loads(rest.stdout)[-1]["id"])
    assert done.stdout == "" and "no more agents" in done.stderr
    assert cli.inline("agents", "list", "--limit", "0").exit_code == 2
    listed = cli.inline_json("agents", "list")  # the default page holds all five
    assert [a["name"] for a in listed] == ["ada", "bob", "cy", "dee", "eve"]
    assert all(a["blocks"] for a in listed)  # each agent's own blocks, read for the page
