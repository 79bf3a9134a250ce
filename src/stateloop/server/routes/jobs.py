"""``/v1/jobs``: Letta's jobs, which stateloop has none of.

Letta 0.16.8 lists jobs of its ``job`` type there, which nothing in it creates any more
(uploads and runs have routes of their own; message batches are jobs of another type): the
list is empty and any id is not found, as here. A run is at ``/v1/runs``."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException

from ..models.requests import errors
from ..models.responses import Response
from ..pagination import Limit

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


def _not_found(job_id: str) -> HTTPException:
    return HTTPException(404, detail=f"Job with id {job_id!r} not found")


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


@router.get("/{job_id}", responses=errors(404), response_model=Job)
async def retrieve_job(job_id: str) -> dict[str, Any]:
    raise _not_found(job_id)


@router.patch("/{job_id}/cancel", responses=errors(404), response_model=Job)
async def cancel_job(job_id: str) -> dict[str, Any]:
    raise _not_found(job_id)


@router.delete("/{job_id}", responses=errors(404), response_model=Job)
async def delete_job(job_id: str) -> dict[str, Any]:
    raise _not_found(job_id)
