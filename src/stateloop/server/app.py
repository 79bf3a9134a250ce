"""The FastAPI app: Letta's REST API over stateloop agents."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from .. import __version__
from ..store import open_store
from ..tools import Tool
from . import errors
from .middleware import ServerMiddleware
from .routes import (
    agents,
    archival,
    blocks,
    catalog,
    context,
    group_runs,
    groups,
    health,
    messages,
    run_metrics,
    runs,
    steps,
)
from .routes import tools as tool_routes
from .runtime import Runtime
from .settings import ServerSettings


def create_app(settings: ServerSettings | None = None, *, tools: Iterable[Tool] = ()) -> FastAPI:
    """A Letta-compatible app; ``tools`` are Python tools agents may use by name (in process,
    trusted), besides the built-in ones and tools created from source (sandboxed)."""
    config = settings or ServerSettings()
    python_tools = list(tools)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime(config, await open_store(config.database_url), python_tools)
        await runtime.start()
        app.state.runtime = runtime
        try:
            yield
        finally:
            await runtime.close()

    app = FastAPI(title="stateloop", version=__version__, lifespan=lifespan,
                  description="Letta's REST API, served by stateloop.")
    # catalog and run_metrics first: their fixed paths (/v1/agents/count, /v1/runs/active)
    # would otherwise be taken for ids by the routes with a path parameter there.
    for module in (health, catalog, run_metrics, agents, context, messages, blocks,
                   tool_routes, archival, runs, steps):
        app.include_router(module.router)
    for module in (groups, group_runs):
        app.include_router(module.router)
    errors.install(app)
    app.add_middleware(ServerMiddleware, tokens=config.tokens(),
                       max_body=config.max_body_bytes)
    app.add_middleware(errors.InternalErrors)  # outermost: it answers for everything inside
    return app
