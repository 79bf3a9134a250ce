"""The FastAPI app: Letta's REST API over stateloop agents."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, MutableMapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from fastapi import Depends, FastAPI

from .. import __version__
from ..llm.warmup import prepare as prepare_models
from ..scheduler import Scheduler
from ..store import open_store
from ..store.batching import unwatch_commits, watch_commits
from ..tools import Tool
from ..tracing import add_watcher, remove_watcher
from . import errors
from .credentials import Credentials
from .limits import Limiter, UsageMeter
from .metrics import ServerMetrics
from .middleware import ServerMiddleware
from .permissions import guard
from .provider_traces import ProviderTraces
from .routes import (
    access,
    agent_files,
    agents,
    archival,
    archives,
    batches,
    blocks,
    catalog,
    chat_completions,
    context,
    conversations,
    embeddings,
    folders,
    git,
    group_runs,
    groups,
    health,
    identities,
    jobs,
    mcp_legacy,
    mcp_oauth,
    mcp_servers,
    messages,
    metadata,
    provider_traces,
    providers,
    run_metrics,
    runs,
    schedules,
    search,
    steps,
)
from .routes import metrics as metrics_route
from .routes import tools as tool_routes
from .routes.agent_file import router as agent_file_router
from .routes.agent_ops import router as agent_ops_router
from .routes.tool_ops import router as tool_ops_router
from .services.batches import BatchRunner
from .services.fleet import AgentChanges
from .services.memory_history import MemoryAuthor
from .services.runtime import Runtime
from .settings import ServerSettings
from .web import router as web_router


def create_app(settings: ServerSettings | None = None, *, tools: Iterable[Tool] = (),
               address: str | None = None) -> FastAPI:
    """A Letta-compatible app; ``tools`` are Python tools agents may use by name (in process,
    trusted), besides the built-in ones and tools created from source (sandboxed).
    ``address``, the URL clients reach the app at, is announced next to a SQLite database
    (``stateloop.store.serving``): the CLI and library agents on it then use the app."""
    config = settings or ServerSettings()
    python_tools = list(tools)
    served_metrics = ServerMetrics()
    credentials = Credentials(config.credentials())
    # Each project's tokens a day: counted where there are credentials or a daily limit.
    meters: list[UsageMeter] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = await open_store(config.database_url)
        if address:
            store.announce(address)
        runtime = Runtime(config, store, python_tools)
        await runtime.start()
        app.state.runtime = runtime
        await _prepare_routes(app)
        # In a thread before the server answers, not on the event loop in a client's call.
        await asyncio.to_thread(prepare_models)
        add_watcher(served_metrics.watch)
        watch_commits(served_metrics.commit)
        served_metrics.count_workers(runtime.workers)
        if credentials.required or config.daily_tokens is not None:
            meters.append(UsageMeter(store, config.daily_tokens))
            add_watcher(meters[0].watch)
            runtime.meter = meters[0]  # batches' and schedules' runs count too
        recorder = ProviderTraces(store) if config.provider_traces else None
        if recorder is not None:
            add_watcher(recorder.watch)
        runtime.scheduler = Scheduler(store, partial(schedules.fire, runtime),
                                      interval=config.schedule_interval)
        runtime.scheduler.start()
        runtime.batches = BatchRunner(store, partial(batches.execute, runtime),
                                      partial(batches.stop, runtime), runtime.callbacks,
                                      concurrency=config.batch_concurrency)
        runtime.batches.start()
        try:
            yield
        finally:
            await runtime.batches.close()
            await runtime.scheduler.close()
            for meter in meters:
                remove_watcher(meter.watch)
                await meter.close()
            meters.clear()
            remove_watcher(served_metrics.watch)
            unwatch_commits(served_metrics.commit)
            if recorder is not None:
                remove_watcher(recorder.watch)
                await recorder.close()
            await folders.close_folders(runtime)
            await runtime.close()

    app = FastAPI(title="stateloop", version=__version__, lifespan=lifespan,
                  description="Letta's REST API, served by stateloop.",
                  dependencies=[Depends(guard)])  # every route: who may call it
    app.state.metrics = served_metrics
    # Health and sending a message first: FastAPI tries the included routers one by one,
    # route by route (~4 us a route), and no other route takes a path of theirs.
    for module in (health, messages):
        app.include_router(module.router)
    # Agent Files: POST /v1/agents/import is a fixed path where /v1/agents/{agent_id} has one.
    app.include_router(agent_file_router)
    # catalog, run_metrics and batches first: their fixed paths (/v1/agents/count,
    # /v1/runs/active, /v1/messages/batches) would otherwise be taken for ids by the routes
    # with a path parameter there.
    for module in (catalog, run_metrics, batches, agents, context, blocks,
                   tool_routes, archival, runs, steps, provider_traces, identities, schedules):
        app.include_router(module.router)
    # Their POSTs at fixed paths (/v1/tools/run, ...) meet no other POST route there.
    for router in (agent_ops_router, tool_ops_router):
        app.include_router(router)
    # shared archival memory, and search across agents: their fixed paths
    # (/v1/agents/messages/search, /v1/messages/search) meet no path parameter of the same method
    for module in (archives, search):
        app.include_router(module.router)
    for module in (groups, group_runs):
        app.include_router(module.router)
    for module in (mcp_servers, mcp_legacy, mcp_oauth, jobs, embeddings, providers, metadata,
                   chat_completions, access):
        app.include_router(module.router)
    app.include_router(mcp_servers.agent_router)
    # the web page at / and /ui/: no API route lives there
    app.include_router(web_router)
    # conversations: threads of one agent sharing its memory
    app.include_router(conversations.router)
    # folders (and sources): their fixed paths (/v1/folders/count, /metadata, /name/...) are
    # declared before {folder_id} within the router
    for module in (folders, agent_files):
        app.include_router(module.router)
    app.include_router(git.router)  # memory history
    app.include_router(metrics_route.router)  # GET /metrics, for Prometheus
    errors.install(app)
    app.add_middleware(MemoryAuthor)  # block edits a request makes are commits by the caller
    app.add_middleware(AgentChanges)  # on a fleet: other processes hear of edits to agents
    app.add_middleware(Limiter, meter=meters, rate=config.rate_limit,
                       runs=config.concurrent_runs)
    app.add_middleware(ServerMiddleware, credentials=credentials,
                       max_body=config.max_body_bytes, max_upload=config.max_upload_bytes,
                       hosts=config.allowed_hosts,
                       open_paths=("/metrics",) if config.metrics_open else ())
    app.add_middleware(errors.InternalErrors)  # outermost: it answers for everything inside
    return app


async def _prepare_routes(app: FastAPI) -> None:
    """Route a path nothing serves, so that FastAPI prepares every route now, at start: it
    does so lazily, on the first request that walks past them (0.5 s of CPU for this app),
    which would otherwise be a client's first call."""
    scope = {"type": "http", "method": "GET", "path": "/\0", "raw_path": b"/%00",
             "root_path": "", "query_string": b"", "headers": []}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        pass

    await app.router(scope, receive, send)  # a 404, answered to no one
