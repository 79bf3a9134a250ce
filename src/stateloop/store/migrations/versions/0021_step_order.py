"""Steps list in SQL: a step's time on the message row that carries it.

``messages.step_at`` is the ``created_at`` of the step record the row carries (NULL on
every other row), so steps page on ``(step_at, step_id)`` through partial indexes that hold
only those rows: all of them and an agent's in that order, and by step id. The ``steps``
table (steps that wrote no message) gets the same two orders on ``(created_at, id)``.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_CREATED_AT = 12  # the step record's created_at: its last field (revision 0007)
_CARRIED = sa.text("step_at IS NOT NULL")


def upgrade() -> None:
    op.add_column("messages", sa.Column("step_at", sa.Float()))
    at = (f"json_extract(step, '$[{_CREATED_AT}]')" if op.get_bind().dialect.name == "sqlite"
          else f"(step ->> {_CREATED_AT})::double precision")
    op.execute(f"UPDATE messages SET step_at = {at} WHERE step IS NOT NULL")
    op.create_index("ix_messages_steps", "messages", ["step_at", "step_id"],
                    sqlite_where=_CARRIED, postgresql_where=_CARRIED)
    op.create_index("ix_messages_agent_steps", "messages", ["agent_id", "step_at", "step_id"],
                    sqlite_where=_CARRIED, postgresql_where=_CARRIED)
    op.create_index("ix_messages_step_id", "messages", ["step_id"],
                    sqlite_where=_CARRIED, postgresql_where=_CARRIED)
    op.create_index("ix_steps_created", "steps", ["created_at", "id"])
    op.create_index("ix_steps_agent_created", "steps", ["agent_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_steps_agent_created", table_name="steps")
    op.drop_index("ix_steps_created", table_name="steps")
    op.drop_index("ix_messages_step_id", table_name="messages")
    op.drop_index("ix_messages_agent_steps", table_name="messages")
    op.drop_index("ix_messages_steps", table_name="messages")
    op.drop_column("messages", "step_at")  # SQLite drops a column in place since 3.35
