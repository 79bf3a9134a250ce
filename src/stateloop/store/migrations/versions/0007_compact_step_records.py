"""Step records on message rows become JSON arrays of ``rows.STEP_RECORD_FIELDS``.

A quarter of the bytes each step writes: no keys, and no id (the row's ``step_id`` holds it).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# The fields in their array order, as this revision defines it.
_FIELDS = ("index", "model", "provider", "input_tokens", "output_tokens",
           "cached_input_tokens", "reasoning_tokens", "cache_write_tokens", "latency_ms",
           "finish_reason", "error", "metadata", "created_at")


def upgrade() -> None:
    _rewrite(lambda step_id, record: [record[name] for name in _FIELDS])


def downgrade() -> None:
    _rewrite(lambda step_id, values: {"id": step_id, **dict(zip(_FIELDS, values, strict=True))})


def _rewrite(convert: Callable[[str, Any], Any]) -> None:
    """Each step record in the new shape. In Python, not SQL: SQLite's JSON functions print
    floats (timestamps) with fewer digits than they were stored with."""
    conn = op.get_bind()
    found = conn.execute(sa.text(
        "SELECT seq, step_id, step FROM messages WHERE step IS NOT NULL")).fetchall()
    if found:
        conn.execute(sa.text("UPDATE messages SET step = :step WHERE seq = :seq"),
                     [{"seq": seq, "step": orjson.dumps(convert(step_id,
                                                                orjson.loads(step))).decode()}
                      for seq, step_id, step in found])
