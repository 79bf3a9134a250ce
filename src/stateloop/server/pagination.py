"""Letta's cursor pagination parameters (``before``/``after`` ids, ``limit``, ``order``) as
the list routes take them; the store pages in SQL (``stateloop.store.Page``)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query

from .models.requests import INT64_MAX

Order = Literal["asc", "desc"]

# A page size: the store passes it to SQL, whose integers are 64-bit.
Limit = Annotated[int | None, Query(ge=1, le=INT64_MAX)]
