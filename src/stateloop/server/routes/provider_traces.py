"""A step's provider trace, its model request and response when the server records them
(``STATELOOP_PROVIDER_TRACES``): ``GET /v1/steps/{step_id}/trace`` and the deprecated
``GET /v1/telemetry/{step_id}``. With recording off, or none recorded, both answer null, as
Letta does; an unknown step is a 404, as on the other step routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..deps import RuntimeDep
from ..models.requests import errors
from ..models.responses import iso
from ..services.runtime import Runtime

router = APIRouter(tags=["steps"])


async def _trace(runtime: Runtime, step_id: str) -> dict[str, Any] | None:
    found = (await runtime.store.get_provider_trace(step_id)
             if runtime.settings.provider_traces else None)
    if found is None:
        await runtime.store.get_step(step_id)  # 404 for a step that does not exist
        return None
    return {"id": found.id, "step_id": found.step_id, "agent_id": found.agent_id,
            "run_id": found.run_id, "call_type": found.call_type, "source": "stateloop",
            "request_json": found.request_json, "response_json": found.response_json,
            "agent_tags": None, "org_id": None, "user_id": None, "compaction_settings": None,
            "llm_config": None, "billing_context": None, "created_by_id": None,
            "last_updated_by_id": None, "created_at": iso(found.created_at),
            "updated_at": iso(found.created_at)}


@router.get("/v1/steps/{step_id}/trace", responses=errors(404),
            response_model=dict[str, Any] | None)
async def retrieve_trace_for_step(step_id: str, runtime: RuntimeDep) -> dict[str, Any] | None:
    """The model request and response of the step, when the server records them; else null."""
    return await _trace(runtime, step_id)


@router.get("/v1/telemetry/{step_id}", responses=errors(404),
            response_model=dict[str, Any] | None, deprecated=True, tags=["telemetry"])
async def retrieve_provider_trace(step_id: str, runtime: RuntimeDep) -> dict[str, Any] | None:
    """Deprecated: ``GET /v1/steps/{step_id}/trace``."""
    return await _trace(runtime, step_id)
