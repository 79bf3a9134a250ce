"""The ``stateloop`` command: chat, run, context, serve, agents and models."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.markup import escape

from .. import __version__
from ..surrogates import first_lone_surrogate
from . import agent_files, agents, db, models, options
from .backend import Backend, open_backend
from .chat import Chat
from .console import call_text, err, out
from .exits import (
    AWAITING_APPROVAL,
    EPILOG,
    INTERRUPTED,
    RUN_FAILED,
    USAGE,
    AmbiguousName,
    CliError,
    fail,
    handled,
)
from .items import Decision, Session, TurnEnd, failed
from .local import LocalBackend
from .render import TurnPrinter
from .spec import DEFAULT_MODEL, AgentSpec
from .windows import warn_if_unknown

app = typer.Typer(
    name="stateloop",
    help="stateloop: stateful LLM agents, from the terminal. Works on the local database "
         "(--db) or a server (--server).",
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold API keys
)
app.add_typer(agents.app, name="agents")


def show_version(value: bool) -> None:
    if value:
        out.print(f"stateloop {__version__}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def options_of_every_command(
    version: Annotated[bool, typer.Option(
        "--version", callback=show_version, is_eager=True,
        help="Print stateloop's version and exit.")] = False,
) -> None:
    pass


# The agent `chat` talks to when none is named: the one `stateloop up` makes ready.
DEFAULT_AGENT = "assistant"
# The server's default body limit (STATELOOP_MAX_BODY_BYTES): a message no server would take
# is refused before anything is sent.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024


@contextmanager
def open_session(backend: Backend, agent: str, *, model: str | None, base_url: str | None,
                 context_window: int | None = None, check: bool = True) -> Iterator[Session]:
    """The agent's session, closed when the block ends."""
    session = backend.session(agent, model=model, base_url=base_url,
                              context_window=context_window, check=check)
    try:
        yield session
    finally:
        session.close()


@app.command()
@handled
def chat(
    agent: Annotated[str | None, typer.Argument(
        help=f"Name or id \\[default: STATELOOP_AGENT, else {DEFAULT_AGENT!r} (the agent "
             "`stateloop up` makes ready), created on first use].", show_default=False)] = None,
    model: options.Model = None, base_url: options.BaseUrl = None,
    context_window: options.ContextWindow = None,
    db: options.Db = None, server: options.Server = None, token: options.Token = None,
) -> None:
    """Talk to an agent: text streams as it arrives; /memory, /context, /reset, /quit."""
    name = agent or os.environ.get("STATELOOP_AGENT") or DEFAULT_AGENT
    with open_backend(db, server, token) as backend:
        if agent is None and ensure_agent(backend, name, model, context_window):
            context_window = None  # stored with the agent just made
        with open_session(backend, name, model=model, base_url=base_url,
                          context_window=context_window) as session:
            try:
                import readline  # noqa: F401  # lazy: optional; line editing for input()
            except ImportError:
                pass
            Chat(session).run()


def ensure_agent(backend: Backend, name: str, model: str | None,
                 context_window: int | None = None) -> bool:
    """Create agent ``name`` unless it exists (on ``model``, else ``STATELOOP_MODEL``, else
    the default); whether it was created."""
    try:
        backend.show_agent(name)
        return False
    except AmbiguousName:
        raise
    except (CliError, LookupError):  # not there yet (locally, or on the server)
        pass
    chosen = model or os.environ.get("STATELOOP_MODEL") or DEFAULT_MODEL
    created = backend.create_agent(AgentSpec(name=name, model=chosen,
                                             context_window=context_window))
    warn_if_unknown(chosen, context_window)
    err.print(f"created agent {escape(created['name'])} with model {escape(chosen)}")
    return True


@app.command()
@handled
def run(
    agent: Annotated[str, typer.Argument(help="Name or id.")],
    message: Annotated[str | None, typer.Argument(
        help="What to say; '-' or nothing reads standard input.", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print what streams as one JSON object a line: Letta's messages "
                       "(message_type), as a server's messages/stream sends them, with or "
                       "without --server.")] = False,
    approve: Annotated[bool, typer.Option(
        "--approve", help="Approve the tool calls the agent waits for, and go on.")] = False,
    deny: Annotated[str | None, typer.Option(
        "--deny", help="Deny the tool calls the agent waits for, with this reason.",
        show_default=False)] = None,
    model: options.Model = None, base_url: options.BaseUrl = None,
    context_window: options.ContextWindow = None,
    db: options.Db = None, server: options.Server = None, token: options.Token = None,
) -> None:
    """Send one message and print the answer (or, with --json, every message as it streams)."""
    answering = approve or deny is not None
    if approve and deny is not None:
        fail("give --approve or --deny, not both", USAGE)
    text = None if answering and message is None else read_message(message)
    with (open_backend(db, server, token) as backend,
          open_session(backend, agent, model=model, base_url=base_url,
                       context_window=context_window) as session):
        pending = session.pending()
        decisions = None
        if answering:
            if not pending:
                fail(f"agent {session.name!r} is not waiting for an approval", USAGE)
            decisions = [Decision(c.id, approve, deny) for c in pending]
        elif pending:
            fail(f"agent {session.name!r} is waiting for approval of "
                 f"{', '.join(call_text(c.name, c.arguments) for c in pending)}; answer with "
                 f"`stateloop run {session.name} --approve` (or --deny REASON) or in "
                 f"`stateloop chat {session.name}`", AWAITING_APPROVAL)
        printer = TurnPrinter(out, err)

        def turn(said: str | None, answers: list[Decision] | None = None) -> TurnEnd:
            if as_json:
                return session.turn(said, decisions=answers, on_item=lambda item: None,
                                    on_raw=print_event)
            ended = session.turn(said, decisions=answers, on_item=printer.show)
            printer.end_line()
            return ended

        end = turn(None if decisions else text, decisions)
        if decisions and text is not None and end.stop_reason == "end_turn":
            end = turn(text)  # the approvals are answered: now the message
    raise typer.Exit(exit_code(end, session.name))


def read_message(message: str | None) -> str:
    """The message from the argument or standard input: UTF-8 text, not empty, and no larger
    than a server takes (``MAX_MESSAGE_BYTES``)."""
    if message is not None and message != "-":
        # Bytes that are not UTF-8 reach argv as lone surrogates: no server can take them.
        if first_lone_surrogate(message) is not None:
            fail("the message is not valid UTF-8 text", USAGE)
        if not message.strip():
            fail("no message: the argument is empty", USAGE)
        if len(message.encode()) > MAX_MESSAGE_BYTES:
            fail(too_long("the message"), USAGE)
        return message
    if sys.stdin.isatty():
        fail("no message: give it as an argument, or pipe it in with '-'", USAGE)
    data = sys.stdin.buffer.read(MAX_MESSAGE_BYTES + 1)
    if len(data) > MAX_MESSAGE_BYTES:
        fail(too_long("standard input"), USAGE)
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        fail(f"standard input is not valid UTF-8 text (byte {exc.start})", USAGE)
    if not text:
        fail("no message: standard input was empty", USAGE)
    return text


def too_long(what: str) -> str:
    return (f"{what} is larger than {MAX_MESSAGE_BYTES // (1024 * 1024)} MiB, more than a "
            "server takes in one request: send less (archival memory holds documents)")


def print_event(data: dict[str, Any]) -> None:
    """One event as one JSON line, flushed so a reader sees it at once."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def exit_code(end: TurnEnd, name: str) -> int:
    """The exit code for how the run ended, with one line on stderr when it is not 0."""
    if failed(end.stop_reason):
        detail = f": {end.error}" if end.error else ""
        err.print(f"[bold red]error:[/] run failed ({end.stop_reason}){escape(detail)}")
        return RUN_FAILED
    if end.stop_reason == "requires_approval":
        calls = ", ".join(call_text(c.name, c.arguments) for c in end.pending)
        err.print(f"waiting for approval: {escape(calls)}; answer with "
                  f"`stateloop run {escape(name)} --approve` (or --deny REASON)")
        return AWAITING_APPROVAL
    if end.stop_reason == "cancelled":
        err.print("cancelled")
        return INTERRUPTED
    return 0


@app.command()
@handled
def context(
    agent: Annotated[str, typer.Argument(help="Name or id.")],
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print Letta's ContextWindowOverview as JSON.")] = False,
    model: options.Model = None,
    db: options.Db = None, server: options.Server = None, token: options.Token = None,
) -> None:
    """Show what the agent's context window holds: totals, then each message with tokens."""
    with (open_backend(db, server, token) as backend,
          open_session(backend, agent, model=model, base_url=None, check=False) as session):
        if as_json:
            out.file.write(json.dumps(session.context_data(), ensure_ascii=False, indent=2,
                                      default=str) + "\n")
        else:
            out.print(session.context_view(), markup=False)


Insecure = Annotated[bool, typer.Option(
    "--insecure", help="Serve off loopback (e.g. --host 0.0.0.0) with no password or API "
                       "keys set: anyone who can reach the port can use every agent.")]
Host = Annotated[str | None, typer.Option(
    help="Address to bind; 0.0.0.0 is every interface \\[default: STATELOOP_HOST, else "
         "127.0.0.1].", show_default=False)]
Port = Annotated[int | None, typer.Option(
    min=1, max=65535, help="Port \\[default: STATELOOP_PORT, else 8283].",
    show_default=False)]
ServerModel = Annotated[str | None, typer.Option(
    "--model", "-m", envvar="STATELOOP_MODEL", show_default=False,
    help="Model of agents created over the API without one: e.g. openai/gpt-4o-mini, "
         "openai/NAME for a local server, or demo/echo (a demo model that needs no provider) "
         "\\[default: STATELOOP_DEFAULT_MODEL, else openai/gpt-4o-mini].")]
UpModel = Annotated[str | None, typer.Option(
    "--model", "-m", envvar="STATELOOP_MODEL", show_default=False,
    help="Model of the ready agent (switched to it if the agent exists) and of agents "
         "created over the API without one: e.g. openai/gpt-4o-mini, openai/NAME for a local "
         "server, or demo/echo (a demo model that needs no provider) \\[default: the agent's "
         "own; for a new one STATELOOP_DEFAULT_MODEL, else openai/gpt-4o-mini].")]
ServerBaseUrl = Annotated[str | None, typer.Option(
    "--base-url", show_default=False,
    help="OpenAI-compatible endpoint every agent's model calls (vLLM, Ollama, llama.cpp, LM "
         "Studio), e.g. http://127.0.0.1:11434/v1 \\[default: STATELOOP_MODEL_BASE_URL, else "
         "OPENAI_BASE_URL].")]


@app.command()
@handled
def serve(
    host: Host = None, port: Port = None,
    model: ServerModel = None, base_url: ServerBaseUrl = None,
    db: options.Db = None, insecure: Insecure = False,
) -> None:
    """Run the HTTP server (Letta's REST API) on the local database."""
    from .serving import (  # lazy: the server's settings (pydantic-settings) cost 0.03 s
        bind,
        check_database,
        provider_ready,
        server_settings,
        start_server,
    )

    settings = server_settings(host, port, db, insecure=insecure, model=model,
                               base_url=base_url)
    sock = bind(settings)
    try:
        check_database(settings)
    except BaseException:
        sock.close()
        raise
    provider_ready(settings, settings.default_model)
    start_server(settings, sock)


@app.command()
@handled
def up(
    agent: Annotated[str, typer.Option(help="The agent to make ready.")] = DEFAULT_AGENT,
    host: Host = None, port: Port = None,
    model: UpModel = None, base_url: ServerBaseUrl = None,
    context_window: options.ContextWindow = None,
    db: options.Db = None, insecure: Insecure = False,
) -> None:
    """Make an agent ready on the local database, say how to talk to it, and serve."""
    from .serving import (  # lazy: the server's settings (pydantic-settings) cost 0.03 s
        bind,
        client_url,
        listens_everywhere,
        provider_ready,
        server_settings,
        start_server,
    )

    # Nothing is created when a setting is wrong or the port is taken.
    settings = server_settings(host, port, db, insecure=insecure, model=model,
                               base_url=base_url)
    sock = bind(settings)
    try:
        backend = LocalBackend(db)
        try:
            if not ensure_agent(backend, agent, model or settings.default_model,
                                context_window) and (model or context_window):
                backend.configure(agent, model, context_window)
            chosen = backend.show_agent(agent)["model"] or settings.default_model
        finally:
            backend.close()
    except BaseException:
        sock.close()
        raise
    address = client_url(settings)
    where = (" (listening on every interface: from another machine, use this one's address)"
             if listens_everywhere(settings) else "")
    if provider_ready(settings, chosen):
        err.print(f"agent [bold]{escape(agent)}[/] is ready. Talk to it:")
    else:
        err.print(f"agent [bold]{escape(agent)}[/] is made, but its model {escape(chosen)} "
                  "cannot answer until a provider is set (above), or until you choose the demo "
                  "model: `make run MODEL=demo/echo` (`stateloop up --model demo/echo`). Then "
                  "talk to it:")
    # The CLI on this server's database finds the server and talks to it (presence.py).
    same_db = "  (or `make chat`)" if db is None and agent == DEFAULT_AGENT else ""
    err.print(f"  .venv/bin/stateloop chat {escape(agent)} --server {escape(address)}"
              f"{escape(same_db)}\n"
              f"  or any Letta client: Letta(base_url=\"{escape(address)}\"){escape(where)}")
    start_server(settings, sock)


# Agent Files (.af): `stateloop import FILE.af`, `stateloop export AGENT > FILE.af`.
app.command("import")(agent_files.import_file)
app.command("export")(agent_files.export_file)
app.command("migrate")(db.migrate)
app.command("models")(models.list_models)


def main() -> None:
    """The ``stateloop`` console script."""
    app(prog_name="stateloop")

