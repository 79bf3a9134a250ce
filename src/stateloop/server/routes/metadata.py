"""Letta Cloud's account metadata: ``/v1/metadata/balance``, the credit balance, and
``/v1/organizations/self/quotas``, the quota of Letta's own ``letta/*`` models. This server
sells no credits and serves no ``letta/*`` models of its own: it answers a balance of none on
a ``self-hosted`` tier and an unlimited quota with no window (its models are paid for at
their providers), so a client that shows them (``letta usage``) shows that."""

from __future__ import annotations

from fastapi import APIRouter

from ..models.responses import Balance, ModelQuota

router = APIRouter(tags=["metadata"])

SELF_HOSTED: dict[str, object] = {"billing_tier": "self-hosted", "total_balance": 0,
               "monthly_credit_balance": 0, "purchased_credit_balance": 0}
NO_QUOTA: dict[str, object] = {"lettaTier": {"bucket": "unlimited", "dailyBucket": None},
            "quotaWindowEnd": None, "dailyQuotaWindowEnd": None}


@router.get("/v1/metadata/balance", response_model=Balance)
async def balance() -> dict[str, object]:
    """No credits: the server bills nothing."""
    return SELF_HOSTED


@router.get("/v1/organizations/self/quotas", response_model=ModelQuota)
async def quotas() -> dict[str, object]:
    """No quota: nothing here is metered."""
    return NO_QUOTA
