"""``/v1/metadata/balance``: Letta Cloud's credit balance. This server sells no credits:
it answers a balance of none on a ``self-hosted`` tier (its models are paid for at their
providers), so a client that shows the balance shows that."""

from __future__ import annotations

from fastapi import APIRouter

from ..models.responses import Balance

router = APIRouter(prefix="/v1/metadata", tags=["metadata"])

SELF_HOSTED = {"billing_tier": "self-hosted", "total_balance": 0,
               "monthly_credit_balance": 0, "purchased_credit_balance": 0}


@router.get("/balance", response_model=Balance)
async def balance() -> dict[str, object]:
    """No credits: the server bills nothing."""
    return SELF_HOSTED
