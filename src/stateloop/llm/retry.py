"""Backoff for transient model errors."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter; a provider's Retry-After wins when given."""

    retries: int = 3
    base: float = 0.5
    cap: float = 10.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return retry_after
        return random.uniform(0, min(self.cap, self.base * 2 ** (attempt - 1)))
