"""Timestamps: stored as float UNIX seconds (UTC); accepted as floats, datetimes or ISO text."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

TimeLike = float | int | datetime | date | str


def to_epoch(value: TimeLike | None, *, end_of_day: bool = False) -> float | None:
    """UNIX seconds for ``value``; a bare date means its start (or, with ``end_of_day``, its end).

    Naive datetimes are taken as UTC, like every timestamp the store writes.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("a timestamp cannot be a bool")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            if len(text) == 10:  # "2025-11-21": a whole day
                value = date.fromisoformat(text)
            else:
                value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"invalid date {value!r}; use ISO 8601 such as '2025-11-21' or "
                "'2025-11-21T15:30:00Z'") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp()
    start = datetime.combine(value, time.min, tzinfo=UTC)
    if end_of_day:
        start += timedelta(days=1, microseconds=-1)
    return start.timestamp()
