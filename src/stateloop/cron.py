"""When a scheduled message is due: standard five-field cron expressions (UTC), checked and
stepped with croniter; a one-time message is due once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from croniter import croniter


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` is not a standard five-field cron expression, or None. Five fields
    fire at most once a minute; croniter's sixth field (seconds) is refused."""
    if len(expression) > 200:
        return "is longer than 200 characters"
    if len(expression.split()) != 5:
        return ("must have five fields (minute hour day-of-month month day-of-week), "
                f"not {len(expression.split())}")
    if not croniter.is_valid(expression):
        return f"{expression!r} is not a valid cron expression"
    return None


def next_time(schedule: dict[str, Any], after: float) -> float | None:
    """When ``schedule`` is next due after firing at ``after`` (seconds, UTC): a cron
    expression's next match strictly after it; None for a one-time message."""
    expression = schedule.get("cron_expression")
    if expression is None:
        return None
    start = datetime.fromtimestamp(after, UTC)
    return float(croniter(expression, start).get_next(float))
