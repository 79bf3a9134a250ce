from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stateloop.llm.retry import RetryPolicy
from stateloop.store import open_store
from stateloop.store.sql import SqlStore


@pytest.fixture
def fast_retry() -> RetryPolicy:
    """Backoff that keeps the real schedule's shape but not its seconds."""
    return RetryPolicy(retries=3, base=0.001, cap=0.01)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    """A SQLite store (the default, inline runner) in a file of the test's own folder."""
    s = await open_store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    await s.close()
