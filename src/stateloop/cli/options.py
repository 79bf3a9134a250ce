"""Options shared by several commands (each also read from its environment variable)."""

from __future__ import annotations

from typing import Annotated

import typer

Db = Annotated[str | None, typer.Option(
    "--db", envvar="STATELOOP_DATABASE_URL", show_default=False,
    help="Local database: sqlite:///PATH or a file path [default: ~/.stateloop/stateloop.db].")]
Server = Annotated[str | None, typer.Option(
    "--server", envvar="STATELOOP_SERVER_URL", show_default=False,
    help="Use a stateloop/Letta server at this URL instead of the local database.")]
Token = Annotated[str | None, typer.Option(
    "--token", envvar="STATELOOP_SERVER_TOKEN", show_default=False,
    help="Bearer token for --server.")]
Model = Annotated[str | None, typer.Option(
    "--model", "-m", show_default=False,
    help="Model to run with, e.g. openai/gpt-4o-mini [default: the agent's stored model].")]
BaseUrl = Annotated[str | None, typer.Option(
    "--base-url", show_default=False,
    help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, LM Studio), e.g. "
         "http://127.0.0.1:11434/v1 [default: OPENAI_BASE_URL].")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
