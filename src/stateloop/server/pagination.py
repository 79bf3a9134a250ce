"""Letta's cursor pagination (``before``/``after`` ids, ``limit``, ``order``) over short
lists already in hand (an agent's blocks, a run's messages); the store pages the long ones
in SQL (``stateloop.store.Page``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Literal, TypeVar

from fastapi import Query

from .models.requests import INT64_MAX

T = TypeVar("T")

Order = Literal["asc", "desc"]

# A page size: the store passes it to SQL, whose integers are 64-bit.
Limit = Annotated[int | None, Query(ge=1, le=INT64_MAX)]


def page(items: Sequence[T], *, key: Callable[[T], str], after: str | None = None,
         before: str | None = None, limit: int | None = None, order: Order = "asc") -> list[T]:
    """The items between the cursors, in ``order``; ``items`` come oldest first.

    As in Letta, ``after`` and ``before`` are relative to the requested order, so a client
    that passes the last id it saw as ``after`` walks the whole list.
    """
    ordered = list(items) if order == "asc" else list(reversed(items))
    ids = [key(item) for item in ordered]
    start, stop = 0, len(ordered)
    if after is not None and after in ids:
        start = ids.index(after) + 1
    if before is not None and before in ids:
        stop = ids.index(before)
    chosen = ordered[start:stop]
    return chosen[:limit] if limit is not None else chosen
