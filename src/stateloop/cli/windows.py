"""Context windows in the CLI: a model stateloop does not know is warned about once, when
its agent is created (with the option that sets the window), never again on each load."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from ..llm.models import DEFAULT_LIMITS, known_limits
from ..llm.registry import resolve_model
from .console import err

if TYPE_CHECKING:
    from ..llm.base import Model


def assumed_window(model: str, window: int | None) -> int | None:
    """The window an agent on ``model`` gets when it is not ``window``: the default, for a
    model outside the registry; None when the registry knows it (or a window is given)."""
    if window is not None or known_limits(model.partition("/")[2] or model) is not None:
        return None
    return DEFAULT_LIMITS.context_window


def warn_if_unknown(model: str, window: int | None) -> None:
    """One line on stderr when an agent is created on a model of unknown window."""
    assumed = assumed_window(model, window)
    if assumed is not None:
        err.print(f"[yellow]warning:[/] unknown model {escape(repr(model))}: assuming a "
                  f"{assumed}-token context window; set it with --context-window N")


def resolved(model: str, window: int | None, **options: Any) -> Model:
    """``model`` as an adapter whose window is settled, so the library has nothing to warn
    about: ``window``, else the registry's, else the default (what it would assume)."""
    return resolve_model(model, context_window=window or assumed_window(model, None),
                         **options)
