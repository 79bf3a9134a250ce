"""``GET /metrics``: the server's Prometheus metrics (behind its authentication unless
``STATELOOP_METRICS_OPEN`` opens the path)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from ..metrics import ServerMetrics

router = APIRouter(tags=["metrics"])


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Runs, steps, model and tool calls, in Prometheus' text format."""
    served: ServerMetrics = request.app.state.metrics
    return Response(served.exposition(), media_type=CONTENT_TYPE_LATEST)
