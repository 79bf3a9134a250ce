"""Message rows stop repeating themselves.

- ``messages.step``: a JSON array of ``rows.STEP_RECORD_FIELDS`` instead of an object, and
  without the step's id, which the row's ``step_id`` holds.
- ``messages.data``: new rows keep the message less its id, role, creation time and token
  count, which are the row's columns (rows stored before keep them in both places).

Together, a third fewer bytes per step.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from typing import Any

import orjson
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# The step record's fields in their array order, as this revision defines it.
_FIELDS = ("index", "model", "provider", "input_tokens", "output_tokens",
           "cached_input_tokens", "reasoning_tokens", "cache_write_tokens", "latency_ms",
           "finish_reason", "error", "metadata", "created_at")


def upgrade() -> None:
    conn = op.get_bind()
    found = conn.execute(sa.text("SELECT seq, step FROM messages WHERE step IS NOT NULL"))
    _update(conn, "step", [(seq, [record[name] for name in _FIELDS])
                           for seq, record in _decoded(found)])


def downgrade() -> None:
    conn = op.get_bind()
    found = conn.execute(sa.text("SELECT seq, step_id, step FROM messages "
                                 "WHERE step IS NOT NULL"))
    _update(conn, "step", [(seq, {"id": step_id, **dict(zip(_FIELDS, values, strict=True))})
                           for seq, step_id, values in _decoded(found)])
    role = ("json_extract(data, '$.role')" if conn.dialect.name == "sqlite"
            else "data->>'role'")
    found = conn.execute(sa.text(
        "SELECT seq, id, role, created_at, token_count, data FROM messages "
        f"WHERE {role} IS NULL"))
    _update(conn, "data", [
        (seq, {"id": id_, "role": role, "created_at": created_at, **body,
               **({} if token_count is None else {"token_count": token_count})})
        for seq, id_, role, created_at, token_count, body in _decoded(found)])


def _decoded(rows: Any) -> list[tuple[Any, ...]]:
    """The rows with their last column parsed. JSON is rewritten in Python, not SQL: SQLite's
    JSON functions print floats (timestamps) with fewer digits than they were stored with."""
    return [(*row[:-1], orjson.loads(row[-1]) if isinstance(row[-1], str) else row[-1])
            for row in rows]  # PostgreSQL's driver parses JSON itself


def _update(conn: Any, column: str, values: list[tuple[int, Any]]) -> None:
    if values:
        conn.execute(sa.text(f"UPDATE messages SET {column} = :value WHERE seq = :seq"),
                     [{"seq": seq, "value": orjson.dumps(value).decode()}
                      for seq, value in values])
