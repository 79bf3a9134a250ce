"""Options shared by several commands (each also read from its environment variable).

Help texts are Rich markup: a literal ``[`` is written ``\\[`` or Rich swallows the bracket
and what it holds (``[default: ...]`` would vanish)."""

from __future__ import annotations

from typing import Annotated

import typer

Db = Annotated[str | None, typer.Option(
    "--db", envvar="STATELOOP_DATABASE_URL", show_default=False,
    help="Local database: sqlite:///PATH or a file path \\[default: ~/.stateloop/stateloop.db].")]
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
