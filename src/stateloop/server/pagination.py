"""Letta's cursor pagination parameters (``before``/``after`` ids, ``limit``, ``order``) as
the list routes take them; the store pages in SQL (``stateloop.store.Page``)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query

Order = Literal["asc", "desc"]

# The most rows one page holds: a larger ``limit`` is refused (422, naming the bound), so
# no request reads a whole table. Letta documents no maximum on most lists.
MAX_PAGE = 10_000
Limit = Annotated[int | None, Query(ge=1, le=MAX_PAGE)]
# Runs: Letta's own bound on ``GET /v1/runs``.
RunsLimit = Annotated[int | None, Query(ge=1, le=1_000)]
