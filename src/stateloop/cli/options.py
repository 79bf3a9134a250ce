"""Options shared by several commands (each also read from its environment variable).

Help texts are Rich markup: a literal ``[`` is written ``\\[`` or Rich swallows the bracket
and what it holds (``[default: ...]`` would vanish)."""

from __future__ import annotations

from typing import Annotated

import typer

from ..store.url import FILE_ENV_VAR, passwords
from .console import err

DB_HELP = (
    "The database: sqlite:///PATH, a file path, or postgresql://USER@HOST/DB \\[default: "
    f"STATELOOP_DATABASE_URL, else the URL in the file {FILE_ENV_VAR} names, else "
    "~/.stateloop/stateloop.db]. Every user of this machine sees a command line (ps): give "
    f"a password through those variables or ~/.pgpass (PGPASSFILE), not here.")


def warn_on_password(ctx: typer.Context, param: typer.CallbackParam,
                     value: str | None) -> str | None:
    """Say so when ``--db`` on the command line holds a password (``ps`` shows it)."""
    source = ctx.get_parameter_source(param.name) if param.name else None
    if value and passwords(value) and source is not None and source.name == "COMMANDLINE":
        err.print("[yellow]warning:[/] the password in --db shows in ps to every user of "
                  "this machine; set STATELOOP_DATABASE_URL, or "
                  f"{FILE_ENV_VAR}=FILE holding the URL, or keep it in ~/.pgpass")
    return value


Db = Annotated[str | None, typer.Option(
    "--db", envvar="STATELOOP_DATABASE_URL", show_default=False, callback=warn_on_password,
    help=DB_HELP)]
Server = Annotated[str | None, typer.Option(
    "--server", envvar="STATELOOP_SERVER_URL", show_default=False,
    help="Use a stateloop/Letta server at this URL instead of the local database.")]
Token = Annotated[str | None, typer.Option(
    "--token", envvar="STATELOOP_SERVER_TOKEN", show_default=False,
    help="Bearer token for --server.")]
Model = Annotated[str | None, typer.Option(
    "--model", "-m", show_default=False,
    help="Model to run with, e.g. openai/gpt-4o-mini \\[default: the agent's stored model].")]
BaseUrl = Annotated[str | None, typer.Option(
    "--base-url", show_default=False,
    help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, LM Studio), e.g. "
         "http://127.0.0.1:11434/v1 \\[default: OPENAI_BASE_URL].")]
ContextWindow = Annotated[int | None, typer.Option(
    "--context-window", min=1, show_default=False,
    help="Tokens the model reads at most, stored with the agent; set it for a model "
         "stateloop does not know (a local server's) \\[default: the model's known window, "
         "else 8192].")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
