"""``/v1/jobs``: Letta's jobs, which in stateloop are its message batches.

Letta 0.16.8 lists jobs of its ``job`` type there, which nothing in it creates any more
(uploads and runs have routes of their own): the list is empty, as here. A job's own routes
take any job's id, and a message batch is a job of type ``batch``: it is retrieved,
cancelled and deleted there too (routes/batches.py). A run is at ``/v1/runs``."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException

from ...store.errors import NotFoundError
from ...store.records import BatchRecord
from ..deps import RuntimeDep
from ..models.requests import errors
from ..models.responses import Response
from ..pagination import Limit
from ..services.runtime import Runtime
from .batches import batch_view

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


class Job(Response):
    """Letta's ``Job``."""

    id: str
    status: str
    created_at: str
    completed_at: str | None = None
    stop_reason: str | None = None
    metadata: dict[str, Any] | None = None
    job_type: str = "job"
    background: bool | None = None
    agent_id: str | None = None
    user_id: str | None = None
    callback_url: str | None = None
    callback_sent_at: str | None = None
    callback_status_code: int | None = None
    callback_error: str | None = None
    ttft_ns: int | None = None
    total_duration_ns: int | None = None


def _job(batch: BatchRecord) -> dict[str, Any]:
    """A message batch as Letta's ``Job``."""
    return {key: value for key, value in batch_view(batch).items() if key in Job.model_fields}


@router.get("", response_model=list[Job])
async def list_jobs(source_id: str | None = None, before: str | None = None,
                    after: str | None = None,
                    limit: Limit = 100,
                    order: Literal["asc", "desc"] = "desc",
                    order_by: Literal["created_at"] = "created_at", active: bool = False,
                    ascending: bool = True) -> list[dict[str, Any]]:
    """Every job: none."""
    return []


@router.get("/active", response_model=list[Job], deprecated=True)
async def list_active_jobs(source_id: str | None = None, before: str | None = None,
                           after: str | None = None,
                           limit: Limit = 50,
                           ascending: bool = True) -> list[dict[str, Any]]:
    """The jobs running: none."""
    return []


async def _batch(runtime: Runtime, job_id: str) -> BatchRecord:
    try:
        return await runtime.store.get_batch(job_id)
    except NotFoundError:
        raise HTTPException(404, detail=f"Job with id {job_id!r} not found") from None


@router.get("/{job_id}", responses=errors(404), response_model=Job)
async def retrieve_job(job_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    return _job(await _batch(runtime, job_id))


@router.patch("/{job_id}/cancel", responses=errors(404), response_model=Job)
async def cancel_job(job_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Cancel a message batch (as ``PATCH /v1/messages/batches/{id}/cancel``)."""
    await _batch(runtime, job_id)
    batch = await runtime.store.cancel_batch(job_id)
    if runtime.batches is not None:
        runtime.batches.wake()
    return _job(batch)


@router.delete("/{job_id}", responses=errors(404), response_model=Job)
async def delete_job(job_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Delete a message batch, cancelled first (the runs it started are kept)."""
    await _batch(runtime, job_id)
    batch = await runtime.store.cancel_batch(job_id)
    if runtime.batches is not None:
        runtime.batches.wake()
    await runtime.store.delete_batch(job_id)
    return _job(batch)
