"""The project a request acts in (a context variable the server sets for its caller): what
it creates is of that project, and lists show that project alone. None, as the library and
an admin naming no project have it: every project."""

from __future__ import annotations

from contextvars import ContextVar

DEFAULT_PROJECT = "default"
acting_project: ContextVar[str | None] = ContextVar("acting_project", default=None)


def creating_in() -> str:
    """The project a row made now belongs to (a column default of the tables that have
    one)."""
    return acting_project.get() or DEFAULT_PROJECT
