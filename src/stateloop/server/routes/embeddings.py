"""``/v1/embeddings``: how much the archives' embeddings take in storage."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, HTTPException

from ..deps import RuntimeDep

router = APIRouter(prefix="/v1/embeddings", tags=["embeddings"])

_BYTES_PER = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


@router.get("/total_storage_size", response_model=float)
async def get_embeddings_total_storage_size(
    runtime: RuntimeDep,
    storage_unit: Annotated[str, Header(alias="storage_unit")] = "GB",
) -> float:
    """The archival passages' embeddings in ``storage_unit`` (a header: B, KB, MB, GB or TB;
    GB if none). Each counts at its own model's dimension, 4 bytes a number."""
    per = _BYTES_PER.get(storage_unit)
    if per is None:
        raise HTTPException(422, detail=[{
            "loc": ["header", "storage_unit"], "type": "value_error",
            "msg": f"Invalid storage unit: {storage_unit}. Must be one of "
                   f"{list(_BYTES_PER)}."}])
    return await runtime.store.embedding_bytes() / per
