"""Dependencies the routes share."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from .runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    """The app's ``Runtime``."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
