"""Is a model provider configured? If not, say exactly what to set (before any run starts)."""

from __future__ import annotations

import os

from ..llm.providers import CATALOGUE
from .exits import NOT_CONFIGURED, CliError

OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_URL = "https://api.anthropic.com"

DEMO_HINT = ("With no provider at all: --model demo/echo, a demo model that repeats what you "
             "say (`make run MODEL=demo/echo` for the server).")
LOCAL_SERVER_HINTS = (
    "For a local OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio) set "
    "OPENAI_BASE_URL, e.g. export OPENAI_BASE_URL=http://127.0.0.1:11434/v1 "
    "(or pass --base-url URL), and name its model with --model openai/MODEL.",
    "For OpenAI itself: export OPENAI_API_KEY=sk-... and use e.g. "
    "--model openai/gpt-4o-mini.",
    DEMO_HINT,
)


def no_model_error(agent: str) -> CliError:
    """The error for an agent that has no model stored and none given."""
    return CliError(f"agent {agent!r} has no model: pass --model, e.g. "
                    "--model openai/gpt-4o-mini", NOT_CONFIGURED, LOCAL_SERVER_HINTS)


def check_provider(model: str, base_url: str | None = None, *,
                   base_url_flag: str | None = "--base-url") -> None:
    """Raise a ``CliError`` (exit 3) naming what to set when ``model`` cannot be reached.

    ``base_url`` is the endpoint the model will call (from ``--base-url`` or the
    environment); a server other than the provider's own needs no key.
    """
    provider = model.partition("/")[0]
    if provider == "openai":
        url = (base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL).rstrip("/")
        if url == OPENAI_URL and not os.environ.get("OPENAI_API_KEY"):
            flag = f" (or {base_url_flag})" if base_url_flag else ""
            raise CliError(f"no model provider configured for {model}: set OPENAI_API_KEY, "
                           f"or OPENAI_BASE_URL{flag} for a local OpenAI-compatible server",
                           NOT_CONFIGURED, LOCAL_SERVER_HINTS)
    elif provider == "anthropic":
        url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_URL).rstrip("/")
        if url == ANTHROPIC_URL and not os.environ.get("ANTHROPIC_API_KEY"):
            raise CliError(f"no model provider configured for {model}: set ANTHROPIC_API_KEY "
                           "(or ANTHROPIC_BASE_URL for a compatible server)", NOT_CONFIGURED,
                           ("Or use an OpenAI-compatible model instead: "
                            "--model openai/MODEL with OPENAI_API_KEY or OPENAI_BASE_URL.",
                            DEMO_HINT))
    elif provider != "demo" and provider in CATALOGUE:
        problem = CATALOGUE[provider].missing()
        if problem is not None:
            where = base_url_flag or "OPENAI_BASE_URL"
            raise CliError(f"no model provider configured for {model}: {problem}",
                           NOT_CONFIGURED,
                           ("`stateloop models` lists every provider and what it needs.",
                            f"Or call the same model on any OpenAI-compatible server: --model "
                            f"openai/{model.partition('/')[2]} with {where} URL.", DEMO_HINT))
