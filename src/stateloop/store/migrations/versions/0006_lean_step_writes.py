"""A step's write touches only the messages table.

- ``agents.in_context_after_seq``: the agent's messages stored after this seq follow the
  stored list in context, so a step that appends to the context rewrites no list.
- ``messages.step``: a step's record rides on the last message row it wrote.
- ``runs.first_seq``: the run's messages all have a higher seq, so finding them (and
  their step records) reads only those.
- ``step_logs``: which batch of each process's step log last committed (dropped by 0008).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("agents", sa.Column("in_context_after_seq", sa.Integer, nullable=False,
                                      server_default="0"))
    # Stored lists are complete: nothing stored so far follows them.
    op.execute("UPDATE agents SET in_context_after_seq = "
               "(SELECT coalesce(max(seq), 0) FROM messages)")
    op.add_column("messages", sa.Column("step", sa.JSON))
    op.add_column("runs", sa.Column("first_seq", sa.Integer, nullable=False,
                                    server_default="0"))
    op.create_table("step_logs", sa.Column("token", sa.String, primary_key=True),
                    sa.Column("batch", sa.Integer, nullable=False))


def downgrade() -> None:
    op.drop_table("step_logs")
    # Fold the implied messages back into the lists and the inline step records into steps.
    if op.get_bind().dialect.name == "sqlite":
        _fold_sqlite()
    else:
        _fold_postgres()
    op.execute("ALTER TABLE runs DROP COLUMN first_seq")
    op.execute("ALTER TABLE messages DROP COLUMN step")
    op.execute("ALTER TABLE agents DROP COLUMN in_context_after_seq")


def _fold_sqlite() -> None:
    op.execute("""
        UPDATE agents SET in_context_message_ids = (
            SELECT json_group_array(id) FROM (
                SELECT 0 AS part, key AS pos, value AS id
                FROM json_each(agents.in_context_message_ids)
                UNION ALL
                SELECT 1, seq, id FROM messages
                WHERE agent_id = agents.id AND seq > agents.in_context_after_seq
                ORDER BY part, pos))""")
    fields = ", ".join(f"json_extract(step, '$.{name}')" for name in _STEP_FIELDS)
    op.execute(f"INSERT INTO steps (id, run_id, agent_id, {', '.join(_STEP_COLUMNS)}) "
               f"SELECT json_extract(step, '$.id'), run_id, agent_id, {fields} "
               "FROM messages WHERE step IS NOT NULL")


_PG_CASTS = {"index": "::integer", "input_tokens": "::integer", "output_tokens": "::integer",
             "cached_input_tokens": "::integer", "reasoning_tokens": "::integer",
             "cache_write_tokens": "::integer", "latency_ms": "::float",
             "created_at": "::float"}


def _fold_postgres() -> None:
    op.execute("""
        UPDATE agents SET in_context_message_ids = (
            SELECT coalesce(json_agg(id ORDER BY part, pos), '[]'::json) FROM (
                SELECT 0 AS part, e.pos AS pos, e.id AS id
                FROM json_array_elements_text(agents.in_context_message_ids)
                    WITH ORDINALITY AS e(id, pos)
                UNION ALL
                SELECT 1, seq, id FROM messages
                WHERE agent_id = agents.id AND seq > agents.in_context_after_seq) AS parts)""")
    fields = ", ".join("step->'metadata'" if name == "metadata"
                       else f"(step->>'{name}'){_PG_CASTS.get(name, '')}"
                       for name in _STEP_FIELDS)
    op.execute(f"INSERT INTO steps (id, run_id, agent_id, {', '.join(_STEP_COLUMNS)}) "
               f"SELECT step->>'id', run_id, agent_id, {fields} "
               "FROM messages WHERE step IS NOT NULL")


_STEP_COLUMNS = ("step_index", "model", "provider", "input_tokens", "output_tokens",
                 "cached_input_tokens", "reasoning_tokens", "cache_write_tokens", "latency_ms",
                 "finish_reason", "error", "metadata", "created_at")
_STEP_FIELDS = ("index", *_STEP_COLUMNS[1:])
