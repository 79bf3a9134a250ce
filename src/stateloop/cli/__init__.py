"""The ``stateloop`` command line (Typer + Rich). Only this package imports them:
``import stateloop`` stays free of CLI dependencies."""

from __future__ import annotations

from .app import main

__all__ = ["main"]
