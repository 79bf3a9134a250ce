"""The two Rich consoles (stdout for answers, stderr for everything else) and text helpers."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console


def _console(*, stderr: bool) -> Console:
    console = Console(stderr=stderr, highlight=False, soft_wrap=True, emoji=False)
    if not console.is_terminal:  # a pipe or a file: no 80-column squeeze of tables and ids
        console.width = 1000
    return console


out = _console(stderr=False)
err = _console(stderr=True)


def shorten(text: str, limit: int = 120) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def call_text(name: str, arguments: dict[str, Any] | str, limit: int = 120) -> str:
    """A tool call as ``name(a=1, b="x")``, shortened."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            return shorten(f"{name}({arguments})", limit)
        arguments = parsed
    args = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}"
                     for key, value in arguments.items())
    return shorten(f"{name}({args})", limit)
