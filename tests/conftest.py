from __future__ import annotations

import pytest

from stateloop.llm.retry import RetryPolicy


@pytest.fixture
def fast_retry() -> RetryPolicy:
    """Backoff that keeps the real schedule's shape but not its seconds."""
    return RetryPolicy(retries=3, base=0.001, cap=0.01)
