"""Exit codes a script can rely on, and turning expected errors into one line on stderr."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.markup import escape

from ..errors import ConfigError, StateloopError
from ..store.errors import DatabaseOpenError, DuplicateError, NotFoundError
from .console import err

OK = 0
RUN_FAILED = 1  # the run ended with a failure stop reason (llm_api_error, error, timeout, ...)
USAGE = 2  # bad input: unknown agent, bad option or value, a port in use (Typer's are 2 too)
NOT_CONFIGURED = 3  # no model provider (API key or base URL), no model, no server available
AWAITING_APPROVAL = 4  # `run` paused: a tool call waits for a human (answer it in `chat`)
INTERRUPTED = 130  # Ctrl-C, as shells report it

EPILOG = (
    "Exit codes: 0 ok; 1 the run failed (stop reason such as llm_api_error, error, timeout); "
    "2 bad input (unknown agent, bad option or message, a port in use); 3 configuration "
    "missing (no provider key or base URL, no model, server not available); 4 the run waits "
    "for a tool approval; "
    "130 interrupted. Errors are one line on stderr starting with 'error:'."
)

F = TypeVar("F", bound=Callable[..., Any])


class CliError(Exception):
    """An error for the user: printed as one line (plus optional hint lines), then exit."""

    def __init__(self, message: str, code: int = USAGE, hints: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.hints = hints


class AmbiguousName(CliError):
    """Several agents have the name given: the command does not guess which one is meant."""

    SHOWN = 10  # ids listed at most

    def __init__(self, name: str, agents: list[tuple[str, str | None]]) -> None:
        listed = ", ".join(f"{agent_id} (created {created or '?'})"
                           for agent_id, created in agents[:self.SHOWN])
        count = f"{self.SHOWN}+" if len(agents) > self.SHOWN else str(len(agents))
        super().__init__(f"{count} agents are named {name!r}: {listed}; give the id of the one "
                         "you mean", USAGE)


def fail(message: str, code: int = USAGE, *hints: str) -> NoReturn:
    """Stop the command with ``message`` on stderr and exit ``code``."""
    raise CliError(message, code, hints)


def report(error: CliError) -> None:
    """Print ``error`` on stderr: one ``error:`` line, then any hints indented."""
    err.print(f"[bold red]error:[/] {escape(error.message)}")
    for hint in error.hints:
        err.print(f"  {escape(hint)}")


def classify(exc: BaseException) -> CliError | None:
    """The ``CliError`` for an exception the user caused or can fix; None for a bug."""
    import httpx  # lazy: httpx costs 0.05 s; only server mode loads it

    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, NotFoundError):
        return CliError(f"{exc} (`stateloop agents list` shows the agents)", USAGE)
    if isinstance(exc, DatabaseOpenError):
        return CliError(str(exc), NOT_CONFIGURED)
    if isinstance(exc, DuplicateError | ConfigError | StateloopError | ValueError):
        return CliError(str(exc), USAGE)
    if isinstance(exc, httpx.HTTPError):
        return CliError(f"cannot reach the server: {exc}", NOT_CONFIGURED)
    return None


def handled(command: F) -> F:
    """Wrap a command: expected errors become one line on stderr and their exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(INTERRUPTED) from None
        except Exception as exc:
            error = classify(exc)
            if error is None:
                raise  # a bug: keep the traceback
            report(error)
            raise typer.Exit(error.code) from None

    return wrapper  # type: ignore[return-value]
