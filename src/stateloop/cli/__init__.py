"""The ``stateloop`` command line (Typer + Rich). Only this package imports them:
``import stateloop`` stays free of CLI dependencies."""

from __future__ import annotations


def main() -> None:
    """Run the ``stateloop`` command."""
    from .app import main as run

    run()


__all__ = ["main"]
