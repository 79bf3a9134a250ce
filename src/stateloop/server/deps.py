"""Dependencies the routes share."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from .services.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:
    """The app's ``Runtime``. Async, so FastAPI calls it in place: a plain function would
    be sent to its thread pool, a thread hop on every request."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
